-- the @cancel script: cancel a job wherever it is.
-- KEYS[1] = the job row, KEYS[2] = the cancelled set
-- ARGV[1] = id, ARGV[2] = the queue base (pending, lanes, schedule and active derive from it)
-- Reply: 1 cancelled (it was waiting: pending, a lane, scheduled (a durable sleep too),
-- a flow parent's waiting-children, or parked on a signal (waiting: it leaves every wait
-- index, its step reads cancelled); it leaves that set and its row becomes
-- state = cancelled in the same call, so no ghost id is left), 2 requested
-- (it is active: the row is marked cancel = 1; its holder learns it at its next lease
-- checkpoint and ends it with @finish_cancelled; a retry or reap of a marked row ends it
-- cancelled too, an ack that lands first completes it), 0 absent (no row, or it already
-- completed, died or was cancelled: nothing written).
-- A batch member cancelled here has its end written for its batch (ended() ->
-- includes/member.lua: the queue's flow outbox).
-- Refusal (nothing written): EMQKIND.
--@include kind
--@include lane
--@include ended
--@include waits
if not is_job(ARGV[1]) then
  return redis.error_reply(KIND_ERROR)
end
local p, id, jk = ARGV[2], ARGV[1], KEYS[1]
local state = redis.call('HGET', jk, 'state')
if state == 'pending' then
  leave_lane(p, jk, id)
elseif state == 'scheduled' then
  redis.call('ZREM', p .. 'schedule', id)
  end_sleep(jk, 'cancelled', now_ms())
elseif state == 'waiting' then
  unwait(p, jk, id, 'cancelled', now_ms())
elseif state == 'waiting-children' then
  -- a flow parent: cancelled here, never released by a late child's carry (the caller,
  -- flows.cancel, cancels its subtree on the children's own slots)
  redis.call('ZREM', p .. 'waiting-children', id)
elseif state == 'active' then
  if redis.call('ZSCORE', p .. 'active', id) then
    redis.call('HSET', jk, 'cancel', '1')
    return 2
  end
  -- a row written active whose lease is on no set has no holder to tell: end it now
else
  return 0
end
cancel_row(p, jk, id)
return 1
