-- A durable job leaving its slot to sleep or wait (echomq.verbs.durable): the fenced
-- caller holds it, so it leaves active (a grouped job lowers its group's active count)
-- and the hand-back is counted as a delay (delays + 1), which the retry budget leaves
-- out: the next claim's attempts + 1 spends no attempt, as a Delay's does.
--@include ring
--@include ended
-- suspend(p, jk, id): take the job of row jk off <p>active; the caller writes where it goes.
local function suspend(p, jk, id)
  if redis.call('ZREM', p .. 'active', id) == 1 then left_active(p, jk) end
  redis.call('HINCRBY', jk, 'delays', 1)
end
-- cancelled_instead(p, jk, id): a job whose cancel was requested while it ran (cancel = 1)
-- does not sleep or wait: it ends cancelled here (off active, as @finish_cancelled ends
-- it), and the caller answers {0, 'cancelled', ...}; true when it did.
local function cancelled_instead(p, jk, id)
  if not redis.call('HGET', jk, 'cancel') then return false end
  if redis.call('ZREM', p .. 'active', id) == 1 then left_active(p, jk) end
  cancel_row(p, jk, id)
  return true
end
