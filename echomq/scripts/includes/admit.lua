-- admit(p, id, payload, mode, value, opts): the one admission every enqueue and schedule
-- script runs. p is the queue base; mode 'now' makes the job wait (pending or its lane),
-- 'in'/'at' put it on the schedule set (priced by price()). opts (a table, may be empty):
--   priority  a number > 0 is written on the row (absent means 0) and scores the wait
--   group     written on the row as 'group'; the job waits on its lane ('' = none)
--   now       the SERVER ms to price 'in' on (bulk scripts read TIME once)
--   batch     a table: the ZADDs are collected as batch[key] = {score, id, ...} for the
--             caller to flush (one variadic ZADD per set instead of one per job), and no
--             wake token is left (the caller wakes once)
-- Returns 1 admitted, 0 the id already has a row (nothing written). Counted on
-- emq:{q}:stats (enqueued) unless opts.batch (the caller counts the batch once).
--@include price
--@include wake
--@include ended
local function admit(p, id, payload, mode, value, opts)
  local jk = p .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then
    return 0
  end
  local pri = tonumber(opts.priority or '0') or 0
  local g = opts.group
  if g == '' then g = nil end
  local state = mode == 'now' and 'pending' or 'scheduled'
  redis.call('HSET', jk, 'state', state, 'attempts', '0', 'payload', payload)
  if pri ~= 0 then redis.call('HSET', jk, 'priority', pri) end
  if g then redis.call('HSET', jk, 'group', g) end
  local key, score
  if mode ~= 'now' then
    key, score = p .. 'schedule', price(mode, value, opts.now)
  elseif g then
    key, score = p .. 'g:' .. g .. ':pending', pri
  else
    key, score = p .. 'pending', pri
  end
  if opts.batch then
    local list = opts.batch[key]
    if not list then
      list = {}
      opts.batch[key] = list
    end
    list[#list + 1] = score
    list[#list + 1] = id
  else
    redis.call('ZADD', key, score, id)
    if key == p .. 'pending' then wake(p .. 'wake') end
    count(p, 'enqueued')
  end
  return 1
end
