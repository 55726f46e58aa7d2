-- the @extend script: a token-fenced lease checkpoint.
-- KEYS[1] = the job row, KEYS[2] = active
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = lease ms
-- Reply: the new lease expiry, SERVER now + lease ms (written with ZADD XX).
-- Refusals (nothing written): EMQKIND, EMQSTALE job gone, EMQSTALE extend token mismatch,
-- EMQSTATE extend not active.
--@include fence
--@include now
local refused = fence(KEYS[1], ARGV[1], ARGV[2], 'extend', KEYS[2])
if refused then return redis.error_reply(refused) end
local expires = now_ms() + tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], 'XX', expires, ARGV[1])
return expires
