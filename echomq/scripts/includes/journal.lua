-- The step journal of a durable job (echomq.verbs.durable), kept ON the job's row, so
-- every script that deletes the row (ack, trim, discard, purge, a flow's rollback) drops
-- the journal with it and no new key needs a second delete:
--   steps          how many steps were recorded (the next one's ordinal)
--   step:<name>    '<ordinal>:<state>:<at_ms>:<until_ms>' (until empty when none), states
--                  done, sleeping, waiting, timed_out, cancelled; at_ms and until_ms are
--                  SERVER ms
--   out:<name>     the step's result (a recorded value or a signal's payload), bytes
--   stall_base     the job's stalls when its last step was recorded (@reap counts the
--                  stalls since: a durable job that records steps is no poison pill)
-- step_of(jk, name): the step recorded under name as {ord, state, at, till}, or nil.
local function step_of(jk, name)
  local m = redis.call('HGET', jk, 'step:' .. name)
  if not m then return nil end
  local ord, st, at, till = string.match(m, '^(%d+):([%a_]+):(%-?%d*):(%-?%d*)$')
  if not ord then return {ord = '0', state = 'done', at = '', till = ''} end
  return {ord = ord, state = st, at = at, till = till}
end
-- new_step(jk, name, state, at, till, out): record a step as the journal's next one.
local function new_step(jk, name, state, at, till, out)
  local ord = redis.call('HINCRBY', jk, 'steps', 1)
  -- a recorded step is progress: the reaper's poison-pill count starts again from here
  -- (stall_base: the stalls before it; @reap dead-letters past max stalls since then)
  local stalled = redis.call('HGET', jk, 'stalled')
  if stalled then redis.call('HSET', jk, 'stall_base', stalled) end
  redis.call('HSET', jk, 'step:' .. name, ord .. ':' .. state .. ':' .. at .. ':' .. (till or ''))
  if out then redis.call('HSET', jk, 'out:' .. name, out) end
end
-- set_step(jk, name, s, state, at, out): move recorded step s (step_of) to state at SERVER
-- ms at, its ordinal and until kept; out, when given, is its result from now on.
local function set_step(jk, name, s, state, at, out)
  redis.call('HSET', jk, 'step:' .. name, s.ord .. ':' .. state .. ':' .. at .. ':' .. s.till)
  if out then redis.call('HSET', jk, 'out:' .. name, out) end
end
-- step_reply(jk, name, fresh, state, at, till): what the fenced step scripts answer:
-- {fresh (1 recorded by this call, 0 found), state, at_ms, until_ms ('' none), result}.
local function step_reply(jk, name, fresh, state, at, till)
  return {fresh, state, at, till or '', redis.call('HGET', jk, 'out:' .. name) or false}
end
-- end_sleep(jk, state, at): the sleep the row names (sleeping) ends: its step moves to
-- state (done at its wake, cancelled) at SERVER ms at, and the row stops naming it.
local function end_sleep(jk, state, at)
  local name = redis.call('HGET', jk, 'sleeping')
  if not name then return end
  redis.call('HDEL', jk, 'sleeping')
  local s = step_of(jk, name)
  if s and s.state == 'sleeping' then set_step(jk, name, s, state, at) end
end
