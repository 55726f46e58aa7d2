-- the @finish_cancelled script: the holder of a cancelled job confirms it stopped.
-- KEYS[1] = the job row, KEYS[2] = active
-- ARGV[1] = id, ARGV[2] = the token
-- Reply: 1 (active -> cancelled: off active, state = cancelled, cancelled_at = SERVER ms,
-- on the cancelled set). Never retried, never dead-lettered.
-- Refusals (nothing written): EMQKIND, EMQSTALE job gone,
-- EMQSTALE finish_cancelled token mismatch, EMQSTATE finish_cancelled not active.
-- Derived (same slot): the queue base, KEYS[2] minus 'active'.
--@include fence
--@include ended
--@include ring
local refused = fence(KEYS[1], ARGV[1], ARGV[2], 'finish_cancelled', KEYS[2])
if refused then return redis.error_reply(refused) end
local p = string.sub(KEYS[2], 1, -7)
redis.call('ZREM', KEYS[2], ARGV[1])
left_active(p, KEYS[1])
cancel_row(p, KEYS[1], ARGV[1])
return 1
