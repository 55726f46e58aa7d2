-- the @extend script: a token-fenced lease checkpoint.
-- KEYS[1] = the job row, KEYS[2] = active
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = lease ms
-- Reply: the new lease expiry, SERVER now + lease ms (written with ZADD XX).
-- Refusals (nothing written): EMQKIND, EMQSTALE job gone, EMQSTALE extend token mismatch,
-- EMQSTATE extend not active.
--@include kind
--@include now
if not is_job(ARGV[1]) then
  return redis.error_reply(KIND_ERROR)
end
local att = redis.call('HGET', KEYS[1], 'attempts')
if not att then return redis.error_reply('EMQSTALE job gone') end
if att ~= ARGV[2] then return redis.error_reply('EMQSTALE extend token mismatch') end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return redis.error_reply('EMQSTATE extend not active')
end
local expires = now_ms() + tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], 'XX', expires, ARGV[1])
return expires
