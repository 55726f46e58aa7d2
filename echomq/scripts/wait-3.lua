-- the @wait script: the job in hand waits for a signal, or takes one already sent.
-- KEYS[1] = the job row, KEYS[2] = active, KEYS[3] = the waiting set (emq:{q}:waiting)
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = the step name, ARGV[4] = the signal key,
-- ARGV[5] = the timeout in ms from SERVER now ('' = none), ARGV[6] = 'check', 'park' or
-- 'take', ARGV[7] = the signal's payload (take only)
-- Reply: {fresh, state, at_ms, until_ms, result}, or nil for a 'check' that found no step
-- of that name (check writes nothing: it runs the refusals and reads the journal):
--   {1, 'waiting', now, until, false}  park, when the queue holds no copy of the signal
--                                      (<base>signalled:<key>, left by @resume): the
--                                      job left active for state = waiting (on
--                                      the waiting set at now, on <base>signal:<key>,
--                                      with a timeout on <base>deadlines at until); a
--                                      delay is counted (no attempt spent)
--   {1, 'done', now, '', payload}      take (or park finding the queue's copy of the
--                                      signal): the payload is the step's result; the
--                                      job stays in hand, nothing parked
--   {0, state, at, until, result}      a step of that name was recorded before (done with
--                                      the payload that resumed it, timed_out, ...):
--                                      unchanged, the job stays in hand; one still
--                                      'waiting' (the job was handed out meanwhile) takes
--                                      the signal if one is there, else is parked again
--                                      until its own timeout
--   {0, 'cancelled', now, '', false}   park, when a cancel was requested while it ran:
--                                      it ends cancelled instead (nothing recorded)
-- Refusals (nothing written): EMQKIND, EMQSTALE job gone, EMQSTALE wait token mismatch,
-- EMQSTATE wait not active, a timeout that is not a finite number or lies past year 9999
-- (includes/bound.lua: ERR EMQ.WAIT due ...).
-- Derived (same slot): the queue base (KEYS[2] minus 'active'), its deadlines set,
-- <base>signal:<key> and <base>signalled:<key>; a timeout ahead of the deadlines' and the
-- schedule's heads leaves a token on <base>due (includes/lead.lua), so the legs re-plan
-- their wake to it.
--@include fence
--@include bound
--@include waits
--@include suspend
--@include lead
local jk, id, name, key = KEYS[1], ARGV[1], ARGV[3], ARGV[4]
local now = now_ms()
local refused = fence(jk, id, ARGV[2], 'wait', KEYS[2])
  or (ARGV[5] ~= '' and due_refusal('WAIT', 'in', ARGV[5], now))
if refused then return redis.error_reply(refused) end
local s = step_of(jk, name)
local p = string.sub(KEYS[2], 1, -7)
local take = ARGV[6] == 'take' and ARGV[7]
  or ARGV[6] == 'park' and redis.call('GET', p .. 'signalled:' .. key)
local till
if s then
  if s.state ~= 'waiting' then return step_reply(jk, name, 0, s.state, s.at, s.till) end
  if ARGV[6] == 'check' then return false end
  if take then
    unwait(p, jk, id, 'done', now, take)
    return {0, 'done', now, s.till, take}
  end
  till = tonumber(s.till)
elseif ARGV[6] == 'check' then
  return false
elseif take then
  new_step(jk, name, 'done', now, '', take)
  return {1, 'done', now, '', take}
elseif cancelled_instead(p, jk, id) then
  return {0, 'cancelled', now, '', false}
else
  till = ARGV[5] ~= '' and (now + tonumber(ARGV[5])) or nil
  new_step(jk, name, 'waiting', now, till)
end
suspend(p, jk, id)
redis.call('HSET', jk, 'state', 'waiting', 'wait_key', key, 'wait_step', name,
  'wait_until', till or '')
redis.call('ZADD', KEYS[3], now, id)
redis.call('SADD', p .. 'signal:' .. key, id)
if till then
  lead_deadline(p, till)  -- the legs wake at the timeout, not at their next beat
  redis.call('ZADD', p .. 'deadlines', till, id)
end
return {s and 0 or 1, 'waiting', s and s.at or now, till or '', false}
