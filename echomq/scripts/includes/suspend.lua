-- A durable job leaving its slot to sleep or wait (echomq.verbs.durable): the fenced
-- caller holds it, so it leaves active (a grouped job lowers its group's active count)
-- and the hand-back is counted as a delay (delays + 1), which the retry budget leaves
-- out: the next claim's attempts + 1 spends no attempt, as a Delay's does.
--@include ring
-- suspend(p, jk, id): take the job of row jk off <p>active; the caller writes where it goes.
local function suspend(p, jk, id)
  if redis.call('ZREM', p .. 'active', id) == 1 then left_active(p, jk) end
  redis.call('HINCRBY', jk, 'delays', 1)
end
