-- the @extend script: a token-fenced lease checkpoint.
-- KEYS[1] = the job row, KEYS[2] = active
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = lease ms, optionally ARGV[4] = 'cancel'
-- Reply: the new lease expiry, SERVER now + lease ms (written with ZADD XX); with
-- ARGV[4] = 'cancel', {expiry, 1 if a cancel was requested (the row's cancel mark) else 0}:
-- the lease checkpoint is where a holder learns of a cancel.
-- Refusals (nothing written): EMQKIND, EMQSTALE job gone, EMQSTALE extend token mismatch,
-- EMQSTATE extend not active, a lease that is not a finite number or prices an expiry
-- past year 9999 (includes/bound.lua: ERR EMQ.EXTEND due ...).
--@include fence
--@include now
--@include bound
local now = now_ms()
local refused = fence(KEYS[1], ARGV[1], ARGV[2], 'extend', KEYS[2])
  or due_refusal('EXTEND', 'in', ARGV[3], now)
if refused then return redis.error_reply(refused) end
local expires = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], 'XX', expires, ARGV[1])
if ARGV[4] == 'cancel' then
  return {expires, redis.call('HEXISTS', KEYS[1], 'cancel')}
end
return expires
