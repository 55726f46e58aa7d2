-- Rows the queue cannot run. A transition that pops an id (a claim) never drops what it
-- popped: a row it cannot run ends dead with the reason, where stats, the dead list and
-- the dashboard show it.
--@include ended
--@include states
-- bury(p, id, why, now): end id dead with error = 'corrupt row: <why>', died_at = now
-- (SERVER ms), on the dead set at now; counted as dead and corrupt on <base>stats. A key
-- that is not a hash is moved aside to <base>corrupt:<id> first (kept for a look, never
-- read by the queue), and the reason says where; a missing row gets one (attempts 0).
local function bury(p, id, why, now)
  local jk = p .. 'job:' .. id
  local kind = redis.call('TYPE', jk)['ok']
  if kind ~= 'hash' and kind ~= 'none' then
    local aside = p .. 'corrupt:' .. id
    redis.call('RENAME', jk, aside)
    why = 'a ' .. kind .. ', not a hash (kept at ' .. aside .. ')'
  end
  redis.call('HSETNX', jk, 'attempts', '0')
  redis.call('HSET', jk, 'state', 'dead', 'error', 'corrupt row: ' .. why, 'died_at', now)
  redis.call('ZADD', p .. 'dead', now, id)
  count(p, 'corrupt')
  ended(p, jk, id, 'dead')
end
-- unrunnable(p, id, waiting, row): why the row of id, popped off the set `waiting`
-- ('pending', or a lane), cannot run: nil when it can. row = HMGET of payload, attempts,
-- state (the pcall reply: an error when the key is not a hash). Also 'stray' when the row
-- lives on the set its (known) state names: the popped entry was a second index of a job
-- that is not lost, and only that entry goes.
local function unrunnable(p, id, waiting, row)
  if row.err then return 'not a hash' end
  local payload, attempts, state = row[1], row[2], row[3]
  if state == 'pending' then
    if not payload then return 'no payload' end
    if attempts and not tonumber(attempts) then
      return "attempts '" .. attempts .. "' is not a number"
    end
    return nil
  end
  if not state then
    if redis.call('EXISTS', p .. 'job:' .. id) == 0 then return 'no row' end
    return 'no state'
  end
  local set = STATE_SET[state]
  if set == nil then return "unknown state '" .. state .. "'" end
  if set and redis.call('ZSCORE', p .. set, id) then return 'stray' end
  return "state '" .. state .. "' on " .. waiting
end
