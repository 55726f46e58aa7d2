-- the @rate_limited script: a job in hand met an upstream limit: back to wait, no attempt spent.
-- KEYS[1] = the job row, KEYS[2] = active
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = block ms
-- Reply: 1. The job leaves active with its attempts decremented (this run does not count
-- against max_attempts) and waits again at its priority (pending, or its lane); its group
-- (or, for a flat job, the whole queue: <base>blocked_until, PX) claims nothing for the
-- block ms, on the SERVER clock. A grouped block parks the group on <base>gwait until
-- SERVER now + ms.
-- Refusals (nothing written): EMQKIND, EMQSTALE job gone,
-- EMQSTALE rate_limited token mismatch, EMQSTATE rate_limited not active, a block that is
-- not a finite number or ends past year 9999 (includes/bound.lua).
-- Derived (same slot): the queue base, KEYS[2] minus 'active'.
--@include fence
--@include lane
--@include now
--@include bound
local refused = fence(KEYS[1], ARGV[1], ARGV[2], 'rate_limited', KEYS[2])
  or due_refusal('RATE_LIMITED', 'in', ARGV[3])
if refused then return redis.error_reply(refused) end
local p = string.sub(KEYS[2], 1, -7)
local ms = tonumber(ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'attempts', -1)
local g = redis.call('HGET', KEYS[1], 'group')
if g then
  redis.call('ZADD', p .. 'gwait', now_ms() + ms, g)
else
  redis.call('SET', p .. 'blocked_until', '1', 'PX', ms)
end
left_active(p, KEYS[1])
readmit(p, KEYS[1], ARGV[1])
return 1
