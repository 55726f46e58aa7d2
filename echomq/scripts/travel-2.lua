-- the @travel script: time travel for tests (echomq.testing): move a queue's stored instants earlier.
-- KEYS[1] = the schedule set, KEYS[2] = the repeat set
-- ARGV[1] = the queue base (the deadlines, gwait and groups sets, group metas, rows, the
-- pause and block flags, debounce keys and the wake and due lists derive from it),
-- ARGV[2] = the shift in ms (an integer > 0: every instant below moves that much earlier),
-- or 'due': the schedule alone moves, by as much as its last run-at is ahead of SERVER
-- now, so everything scheduled is due now
-- Reply: {shift ms, run-ats moved, registrations moved, deadlines moved, pause ends and
-- blocks moved}
-- What moves, each by the same shift, so their order is kept and an instant within the
-- shift of now is due now: run-ats on the schedule (and a debounced job's cap, the first
-- call on its debounce key, and a sleeping durable job's wake on its sleep step), registrations' next runs on the repeat set (HOST ms; a parked
-- +inf stays) and their pause ends (paused_until), deadlines (the deadlines set and each
-- row's expires), groups' pause ends (paused_until on the meta) and every gwait entry (a
-- pause end, a rate block), and the queue's pause end and rate block (PX flags: one the
-- shift reaches is gone, as at its end). Never moved: active leases (the reaper would take
-- running jobs), kept results, unique keys, the flow admission deadlines; SERVER TIME keeps
-- real time. One token on the wake list and one on the due list make idle consumers re-read.
-- No production transition calls this: the testing kit alone does (testing.advance, and
-- testing.drain(with_scheduled=True) with 'due').
--@include now
--@include wake
--@include journal
local p = ARGV[1]
local function shift_set(key, d, each)
  local flat = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local moved = 0
  for i = 1, #flat, 2 do
    local score = tonumber(flat[i + 1])
    if score ~= math.huge then
      redis.call('ZADD', key, score - d, flat[i])
      moved = moved + 1
      if each then each(flat[i]) end
    end
  end
  return moved
end
local function shift_field(key, field, d)
  local got = redis.pcall('HGET', key, field)
  local at = type(got) ~= 'table' and tonumber(got or '') or nil
  if at then redis.call('HSET', key, field, at - d) end
end
local function shift_flag(key, d)
  local ttl = redis.call('PTTL', key)
  if ttl <= 0 then return 0 end
  if ttl <= d then
    redis.call('DEL', key)
  else
    redis.call('PEXPIRE', key, ttl - d)
  end
  return 1
end
-- a durable job asleep on the schedule: its sleep step's wake moves with its run-at, so
-- the re-run finds the sleep over (else it goes back to sleep for the time left)
local function shift_sleep(id, d)
  local jk = p .. 'job:' .. id
  local name = redis.call('HGET', jk, 'sleeping')
  local s = name and step_of(jk, name)
  if s and tonumber(s.till) then
    redis.call('HSET', jk, 'step:' .. name, s.ord .. ':' .. s.state .. ':' .. s.at .. ':'
      .. string.format('%d', tonumber(s.till) - d))
  end
end
local d
if ARGV[2] == 'due' then
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  d = last[2] and math.max(0, tonumber(last[2]) - now_ms()) or 0
  if d == 0 then return {0, 0, 0, 0, 0} end
  local n = shift_set(KEYS[1], d, function(id) shift_sleep(id, d) end)
  wake(p .. 'due')
  wake(p .. 'wake')
  return {d, n, 0, 0, 0}
end
d = tonumber(ARGV[2])
if not d or d <= 0 or d ~= math.floor(d) then
  return redis.error_reply('ERR EMQ.TRAVEL the shift must be an integer of ms > 0')
end
local runs = shift_set(KEYS[1], d, function(id)
  shift_sleep(id, d)
  local key = redis.call('HGET', p .. 'job:' .. id, 'debounce')
  if key then shift_field(p .. 'debounce:' .. key, 'first', d) end
end)
local regs = shift_set(KEYS[2], d, function(name)
  shift_field(p .. 'repeat:' .. name, 'paused_until', d)
end)
local deadlines = shift_set(p .. 'deadlines', d, function(id)
  shift_field(p .. 'job:' .. id, 'expires', d)
end)
local holds = shift_set(p .. 'gwait', d)
for _, g in ipairs(redis.call('SMEMBERS', p .. 'groups')) do
  shift_field(p .. 'g:' .. g, 'paused_until', d)
end
holds = holds + shift_flag(p .. 'paused', d) + shift_flag(p .. 'blocked_until', d)
wake(p .. 'due')
wake(p .. 'wake')
return {d, runs, regs, deadlines, holds}
