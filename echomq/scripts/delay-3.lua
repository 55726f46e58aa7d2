-- the @delay script: send a job in hand back to the schedule, attempts untouched.
-- KEYS[1] = the job row, KEYS[2] = active, KEYS[3] = the schedule set
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = 'in' or 'at', ARGV[4] = the value
-- Reply: 1. Refusals (nothing written): EMQKIND, EMQSTALE job gone,
-- EMQSTALE delay token mismatch, a due that is not a finite number or prices a score past
-- year 9999 (includes/bound.lua: ERR EMQ.DELAY due ...). Never dead-letters.
-- 'in' prices on the SERVER clock, any other mode is an absolute run-at (as @schedule).
-- A member already gone from active makes the ZREM a no-op and the job is scheduled all
-- the same (the native twin refuses that case with EMQSTATE delay not active). A grouped
-- job lowers its group's active count (the native twin refuses a grouped row: the verb
-- falls back to this script). Derived: the queue base, KEYS[2] minus 'active'.
--@include fence
--@include price
--@include lead
--@include ring
--@include bound
local refused = fence(KEYS[1], ARGV[1], ARGV[2], 'delay', nil)
  or due_refusal('DELAY', ARGV[3] == 'in' and 'in' or 'at', ARGV[4])
if refused then return redis.error_reply(refused) end
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  left_active(string.sub(KEYS[2], 1, -7), KEYS[1])
end
redis.call('HSET', KEYS[1], 'state', 'scheduled')
local score = price(ARGV[3], ARGV[4])
lead(string.sub(KEYS[3], 1, -9), score)
redis.call('ZADD', KEYS[3], score, ARGV[1])
return 1
