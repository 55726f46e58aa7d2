-- the @sleep script: a durable sleep of the job in hand (a Delay that resumes).
-- KEYS[1] = the job row, KEYS[2] = active, KEYS[3] = the schedule set
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = the step name, ARGV[4] = 'in' or 'at',
-- ARGV[5] = the value (ms: a span added to SERVER now, or an absolute wake)
-- Reply: {fresh, state, at_ms, until_ms, result}:
--   {1, 'sleeping', now, wake, false}  recorded by this call: the job left active for the
--                                      schedule at wake (state = scheduled)
--   {0, 'sleeping', at, wake, false}   recorded before, its wake still ahead (the job was
--                                      claimed early): back to the schedule until then
--   {0, 'done', wake, wake, false}     recorded before, its wake has come: the step is
--                                      done from now on; the job stays in hand
--   {0, state, at, until, result}      a step of that name of another kind: unchanged
--   {0, 'cancelled', now, '', false}   a cancel was requested while it ran: it ends
--                                      cancelled instead of sleeping (nothing recorded)
-- Either sleeping reply counts a delay (delays + 1: no attempt spent) and leaves the
-- step's name on the row (sleeping) for @why. 'in' prices on the SERVER clock.
-- Refusals (nothing written): EMQKIND, EMQSTALE job gone, EMQSTALE sleep token mismatch,
-- EMQSTATE sleep not active, a due that is not a finite number or lies past year 9999
-- (includes/bound.lua: ERR EMQ.SLEEP due ...).
-- Derived (same slot): the queue base, KEYS[2] minus 'active'.
--@include fence
--@include bound
--@include price
--@include lead
--@include journal
--@include suspend
local jk, id, name = KEYS[1], ARGV[1], ARGV[3]
local now = now_ms()
local mode = ARGV[4] == 'in' and 'in' or 'at'
local refused = fence(jk, id, ARGV[2], 'sleep', KEYS[2]) or due_refusal('SLEEP', mode, ARGV[5], now)
if refused then return redis.error_reply(refused) end
local s = step_of(jk, name)
local p = string.sub(KEYS[2], 1, -7)
local at, wake
if s and s.state == 'sleeping' then
  at, wake = s.at, tonumber(s.till) or now
  if wake <= now then
    set_step(jk, name, s, 'done', s.till)
    redis.call('HDEL', jk, 'sleeping')
    return {0, 'done', s.till, s.till, false}
  end
elseif s then
  return step_reply(jk, name, 0, s.state, s.at, s.till)
end
if cancelled_instead(p, jk, id) then return {0, 'cancelled', now, '', false} end
if not s then
  at, wake = now, price(mode, ARGV[5], now)
  new_step(jk, name, 'sleeping', now, wake)
end
suspend(p, jk, id)
redis.call('HSET', jk, 'state', 'scheduled', 'sleeping', name)
lead(p, wake)
redis.call('ZADD', KEYS[3], wake, id)
return {s and 0 or 1, 'sleeping', at, wake, false}
