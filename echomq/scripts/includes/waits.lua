-- A job parked on a signal (state 'waiting', echomq.verbs.durable): on <p>waiting scored
-- by the SERVER ms it parked, on <p>signal:<key> (the ids of this queue waiting for that
-- key), and, with a timeout, on <p>deadlines scored by it (the deadline sweep, @expire,
-- times it out). Its row names the wait: wait_key, wait_step, wait_until ('' none).
--@include journal
-- unwait(p, jk, id, state, now, out): end the wait of the waiting job of row jk: off
-- every wait index, its step moved to state (done with out, timed_out, cancelled) at
-- SERVER ms now. The caller writes where the job goes next.
local function unwait(p, jk, id, state, now, out)
  local f = redis.call('HMGET', jk, 'wait_key', 'wait_step')
  redis.call('ZREM', p .. 'waiting', id)
  redis.call('ZREM', p .. 'deadlines', id)
  if f[1] then redis.call('SREM', p .. 'signal:' .. f[1], id) end
  redis.call('HDEL', jk, 'wait_key', 'wait_step', 'wait_until')
  local s = f[2] and step_of(jk, f[2])
  if s then set_step(jk, f[2], s, state, now, out) end
end
