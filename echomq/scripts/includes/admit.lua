-- admit(p, id, payload, mode, value, opts): the one admission every enqueue and schedule
-- script runs. p is the queue base; mode 'now' makes the job wait (pending or its lane),
-- 'in'/'at' put it on the schedule set (priced by price()). opts (a table, may be empty;
-- '' counts as absent):
--   priority  a number > 0 is written on the row (absent means 0) and scores the wait
--   group     written on the row as 'group' (and added to <base>groups); the job waits
--             on its lane, which offers the group to the ring
--   unique    a unique key: admitted only if no live job owns <base>unique:<key>; the
--             key is set to this id (no TTL while the job lives; ended() releases it)
--   unique_for  ms: the key also holds until admission + this (SERVER clock), written
--             on the row as unique_until
--   notify    ms: written on the row; the job's end leaves a done token kept that long
--   expires   the deadline: '+<ms>' after SERVER now (now, or TIME), or '<ms>' an absolute
--             instant; written on the row as SERVER ms (expires) and put on
--             <base>deadlines: a job not started by then ends expired (includes/expiry.lua)
--   now       the SERVER ms to price 'in' on (bulk scripts read TIME once)
--   fresh     true: the caller has checked that the id has no row (no second EXISTS)
--   fields    a flat list of more row fields (a flow node's parent, policy), written
--             with the row
--   batch     a table: the ZADDs are collected as batch[key] = {score, id, ...} for the
--             caller to flush (one variadic ZADD per set instead of one per job), and no
--             wake token is left nor counter bumped (the caller does both once); a lane
--             admission is written (and counted) at once all the same
-- Returns 1 admitted, 0 the id already has a row (or was deleted at its ack moments
-- ago: includes/seen.lua; a `fresh` caller checks both), or the owner's id when a live
-- job owns the unique key (unique_owner; nothing written either way). A key whose owner is gone or
-- ended and whose unique_for window has passed is stale: it is taken over (healed).
--@include price
--@include lead
--@include ring
--@include ended
--@include chunks
--@include seen
local function given(v)
  if v == nil or v == '' then return nil end
  return v
end
-- unique_owner(p, key): the id of the live job that owns unique key <key> (waiting,
-- running, a flow parent waiting for its children, a durable job parked on a signal, or
-- any job inside its unique_for window), or nil when the key is free or stale.
local function unique_owner(p, key)
  local uk = p .. 'unique:' .. key
  local owner = redis.call('GET', uk)
  if owner then
    local st = redis.call('HGET', p .. 'job:' .. owner, 'state')
    if st == 'pending' or st == 'scheduled' or st == 'active' or st == 'waiting-children'
        or st == 'waiting' or redis.call('PTTL', uk) > 0 then
      return owner
    end
  end
  return nil
end
-- take_unique(p, jk, id, key, unique_for, now): job id (row jk) owns unique key <key>
-- from now on (the caller checked unique_owner); unique_for ms also holds it past the
-- job's end, until admission + that (SERVER ms, on the row as unique_until).
local function take_unique(p, jk, id, key, unique_for, now)
  redis.call('SET', p .. 'unique:' .. key, id)
  redis.call('HSET', jk, 'unique', key)
  local ttl = given(unique_for)
  if ttl then redis.call('HSET', jk, 'unique_until', (now or now_ms()) + tonumber(ttl)) end
end
local function admit(p, id, payload, mode, value, opts)
  local jk = p .. 'job:' .. id
  if not opts.fresh and (redis.call('EXISTS', jk) == 1 or seen_recently(p, id)) then
    return 0
  end
  local unique = given(opts.unique)
  if unique then
    local owner = unique_owner(p, unique)
    if owner then return owner end
  end
  local pri = tonumber(opts.priority or '0') or 0
  local g = given(opts.group)
  local state = mode == 'now' and 'pending' or 'scheduled'
  -- the row in one HSET (a command per field cost a call each), fields in the order
  -- they always had: state, attempts, payload, priority, group, unique..., notify
  local row, n = {'state', state, 'attempts', '0', 'payload', payload}, 6
  if pri ~= 0 then
    row[n + 1], row[n + 2], n = 'priority', pri, n + 2
  end
  if g then
    row[n + 1], row[n + 2], n = 'group', g, n + 2
    redis.call('SADD', p .. 'groups', g)
  end
  local notify = given(opts.notify)
  if notify and not unique then
    row[n + 1], row[n + 2], n = 'notify', notify, n + 2
  end
  local expires = given(opts.expires)
  if expires then
    if string.sub(expires, 1, 1) == '+' then
      expires = (opts.now or now_ms()) + tonumber(string.sub(expires, 2))
    else
      expires = tonumber(expires)
    end
    row[n + 1], row[n + 2], n = 'expires', expires, n + 2
    redis.call('ZADD', p .. 'deadlines', expires, id)
  end
  for _, v in ipairs(opts.fields or {}) do
    row[n + 1], n = v, n + 1
  end
  redis.call('HSET', jk, unpack(row))
  if unique then
    take_unique(p, jk, id, unique, opts.unique_for, opts.now)
    if notify then redis.call('HSET', jk, 'notify', notify) end
  end
  local key, score
  if mode ~= 'now' then
    key, score = p .. 'schedule', price(mode, value, opts.now)
  elseif g then
    key, score = p .. 'g:' .. g .. ':pending', pri
  else
    key, score = p .. 'pending', pri
  end
  if g and mode == 'now' then
    -- a lane admission is never batched: its group's ring state follows it at once
    redis.call('ZADD', key, score, id)
    ring_sync(p, g)
    count(p, 'enqueued')
  elseif opts.batch then
    local list = opts.batch[key]
    if not list then
      list = {}
      opts.batch[key] = list
    end
    list[#list + 1] = score
    list[#list + 1] = id
  else
    if mode ~= 'now' then lead(p, score) end
    redis.call('ZADD', key, score, id)
    if key == p .. 'pending' then wake(p .. 'wake') end
    count(p, 'enqueued')
  end
  return 1
end
-- admit_opts(i, last): the option tail ARGV[i..i+4] (priority, group, unique, unique_for,
-- notify) as admit()'s opts table; with last (the tail ends the call), ARGV[i+5] is the
-- deadline (expires) when given.
local function admit_opts(i, last)
  return {priority = ARGV[i], group = ARGV[i + 1], unique = ARGV[i + 2],
          unique_for = ARGV[i + 3], notify = ARGV[i + 4], expires = last and ARGV[i + 5]}
end
-- flush(p, batch): write the ZADDs admit() collected in opts.batch (one variadic ZADD per
-- set), count them as enqueued once, and wake a consumer if any joined pending (or re-plan
-- a beat loop if one leads the schedule: lead()).
local function flush(p, batch)
  local n = 0
  if batch[p .. 'schedule'] then lead_many(p, batch[p .. 'schedule']) end
  for key, list in pairs(batch) do
    in_chunks(list, 2000, function(...) redis.call('ZADD', key, ...) end)
    n = n + #list / 2
  end
  if n > 0 then count(p, 'enqueued', n) end
  if batch[p .. 'pending'] then wake(p .. 'wake') end
end
