-- the @retry script: token-fenced failure of a job in hand.
-- KEYS[1] = the job row, KEYS[2] = active, KEYS[3] = the schedule set, KEYS[4] = dead
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = delay ms, ARGV[4] = max attempts,
-- ARGV[5] = the error text, ARGV[6] = the run's formatted traceback ('' for none),
-- ARGV[7] = how many failures the row's history keeps (absent or 0: none)
-- Reply: 1 retrying (parked on the schedule set at SERVER now + delay, state = scheduled),
-- 2 dead (attempts reached max attempts: on the dead set at SERVER now, state = dead).
-- Either way failures is incremented and the error text is kept on the row; with ARGV[6]
-- the traceback is kept too ('traceback'), and with ARGV[7] > 0 the failure joins the row's
-- history ('errors': a JSON list of {at_ms (SERVER now), run (the token), error,
-- traceback}, oldest first, the last ARGV[7] kept), written with the transition.
-- 3 cancelled: a cancel was requested while it ran (cancel = 1): it ends cancelled
-- (state = cancelled, on the cancelled set), never retried nor dead-lettered.
-- Counted on emq:{q}:stats: failed, and retried or dead (or cancelled). A grouped job
-- lowers its group's active count.
-- Derived (same slot): the queue base, KEYS[2] minus 'active'.
-- Refusals (nothing written): EMQKIND, EMQSTALE job gone, EMQSTALE retry token mismatch,
-- EMQSTATE retry not active, a delay that is not a finite number or prices a run-at past
-- year 9999 (includes/bound.lua: ERR EMQ.RETRY due ...).
--@include fence
--@include ended
--@include ring
--@include lead
--@include bound
local now = now_ms()
local refused = fence(KEYS[1], ARGV[1], ARGV[2], 'retry', KEYS[2])
  or due_refusal('RETRY', 'in', ARGV[3], now)
if refused then return redis.error_reply(refused) end
local p = string.sub(KEYS[2], 1, -7)
redis.call('ZREM', KEYS[2], ARGV[1])
left_active(p, KEYS[1])
redis.call('HINCRBY', KEYS[1], 'failures', 1)
local keep = tonumber(ARGV[7] or '0') or 0
if ARGV[6] and ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'traceback', ARGV[6]) end
if keep > 0 then
  local ok, history = pcall(cjson.decode, redis.call('HGET', KEYS[1], 'errors') or '[]')
  if not ok or type(history) ~= 'table' then history = {} end  -- another client's text
  history[#history + 1] = {at_ms = now, run = tonumber(ARGV[2]), error = ARGV[5],
                           traceback = ARGV[6] or ''}
  while #history > keep do table.remove(history, 1) end
  redis.call('HSET', KEYS[1], 'errors', cjson.encode(history))
end
if redis.call('HGET', KEYS[1], 'cancel') then
  redis.call('HSET', KEYS[1], 'error', ARGV[5])
  cancel_row(p, KEYS[1], ARGV[1], now)
  return 3
end
count(p, 'failed')
-- the fence held, so the token is the row's attempts
if tonumber(ARGV[2]) >= tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[1], 'state', 'dead', 'error', ARGV[5], 'died_at', now)
  redis.call('ZADD', KEYS[4], now, ARGV[1])
  ended(p, KEYS[1], ARGV[1], 'dead')
  return 2
end
redis.call('HSET', KEYS[1], 'state', 'scheduled', 'error', ARGV[5])
lead(p, now + tonumber(ARGV[3]))
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[1])
count(p, 'retried')
return 1
