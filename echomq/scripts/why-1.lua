-- the @why script: what holds a job that is not running, and when it lets go. Reads only.
-- KEYS[1] = the job row
-- ARGV[1] = the queue base (the sets, the group meta, the flags derive from it), ARGV[2] = id
-- Reply: a flat array of field, value pairs: 'state' (the row's, '' when no row), 'now'
-- (SERVER ms), 'expires' (the deadline, when the row has one), 'lease' (a running job's
-- lease expiry, SERVER ms), and for a job that waits
-- 'hold' with the fields of the one control that holds it, the first that applies:
--   after          job, its (a recurrence occurrence held by its overlap policy until the
--                  occurrence job ends; its = that job's state)
--   sleep          step, at (a durable sleep: its step's name and its wake, the run-at)
--   scheduled      at (its run-at)
--   signal         key, step, until (a durable wait: the signal key, its step's name and
--                  its timeout, '' = none)
--   children       left (children still to settle), of (its children)
--   paused         until (the queue's pause end, '' = until resumed)
--   blocked        until (a queue-level rate_limited)
--   group-paused   group, until ('' = until resumed)
--   group-limit    group, active, limit
--   group-rate     group, max, ms, until (the group's window reopens)
--   group-blocked  group, until (a group-level rate_limited)
--   rate           max, ms, until (the queue's window reopens)
--   limit          active, limit (the queue cap: live leases on active at its limit)
--   behind         n (jobs ahead of it: lower priority, or equal and minted earlier, on
--                  pending or its lane), priority, group ('' = flat)
-- A running or ended job has no hold. Bounded: a fixed number of reads plus the buckets of
-- one rate window (at most one per ms of the window). Writes nothing (no window pruning:
-- the buckets that left the window are skipped, not removed).
--@include now
local p, id = ARGV[1], ARGV[2]
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'state', 'group', 'priority', 'expires', 'after',
  'sleeping', 'wait_key', 'wait_step', 'wait_until')
local st = f[1]
local out = {'state', st or '', 'now', now}
local function add(...)
  for _, v in ipairs({...}) do out[#out + 1] = v end
end
if f[4] then add('expires', f[4]) end
-- starts(log, ms): the starts in the window ending now, and the SERVER ms it reopens
local function starts(log, ms)
  local inside = redis.call('ZRANGEBYSCORE', log, '(' .. (now - ms), '+inf')
  local used = 0
  if #inside > 0 then
    for _, c in ipairs(redis.call('HMGET', log .. ':n', unpack(inside))) do
      used = used + tonumber(c or '0')
    end
  end
  return used, inside[1] and (tonumber(inside[1]) + ms) or now
end
if st == 'scheduled' and f[5] then
  add('hold', 'after', 'job', f[5], 'its', redis.call('HGET', p .. 'job:' .. f[5], 'state') or '')
  return out
end
if st == 'scheduled' and f[6] then
  add('hold', 'sleep', 'step', f[6], 'at', redis.call('ZSCORE', p .. 'schedule', id) or '')
  return out
end
if st == 'waiting' then
  add('hold', 'signal', 'key', f[7] or '', 'step', f[8] or '', 'until', f[9] or '')
  return out
end
if st == 'scheduled' then
  add('hold', 'scheduled', 'at', redis.call('ZSCORE', p .. 'schedule', id) or '')
  return out
end
if st == 'waiting-children' then
  add('hold', 'children', 'left', redis.call('SCARD', p .. 'deps:' .. id),
      'of', redis.call('LLEN', p .. 'kids:' .. id))
  return out
end
if st == 'active' then add('lease', redis.call('ZSCORE', p .. 'active', id) or '') end
if st ~= 'pending' then return out end
local ttl = redis.call('PTTL', p .. 'paused')
if ttl ~= -2 then
  add('hold', 'paused', 'until', ttl > 0 and (now + ttl) or '')
  return out
end
ttl = redis.call('PTTL', p .. 'blocked_until')
if ttl > 0 then
  add('hold', 'blocked', 'until', now + ttl)
  return out
end
local g = f[2]
if g then
  local mk = p .. 'g:' .. g
  local m = redis.call('HMGET', mk, 'active', 'limit', 'paused', 'rate_max', 'rate_ms',
    'paused_until')
  -- a field the group does not set falls back to the queue's defaults (gdefaults)
  if not (m[2] and m[4]) then
    local d = redis.call('HMGET', p .. 'gdefaults', 'limit', 'rate_max', 'rate_ms')
    m[2] = m[2] or d[1]
    if not m[4] then m[4], m[5] = d[2], d[3] end
  end
  if m[3] then
    add('hold', 'group-paused', 'group', g, 'until', m[6] or '')
    return out
  end
  local active = tonumber(m[1] or '0')
  if m[2] and active >= tonumber(m[2]) then
    add('hold', 'group-limit', 'group', g, 'active', active, 'limit', m[2])
    return out
  end
  local gw = tonumber(redis.call('ZSCORE', p .. 'gwait', g) or '')
  if m[4] then
    local used, reopens = starts(mk .. ':starts', tonumber(m[5]))
    if used >= tonumber(m[4]) then
      add('hold', 'group-rate', 'group', g, 'max', m[4], 'ms', m[5], 'until', gw or reopens)
      return out
    end
  end
  if gw and gw > now then
    add('hold', 'group-blocked', 'group', g, 'until', gw)
    return out
  end
end
local qr = redis.call('HMGET', p .. 'rate', 'max', 'ms')
if qr[1] then
  local used, reopens = starts(p .. 'starts', tonumber(qr[2]))
  if used >= tonumber(qr[1]) then
    add('hold', 'rate', 'max', qr[1], 'ms', qr[2], 'until', reopens)
    return out
  end
end
local cap = tonumber(redis.call('GET', p .. 'limit') or '')
if cap then
  local live = redis.call('ZCOUNT', p .. 'active', '(' .. now, '+inf')
  if live >= cap then
    add('hold', 'limit', 'active', live, 'limit', cap)
    return out
  end
end
local lane = g and (p .. 'g:' .. g .. ':pending') or (p .. 'pending')
add('hold', 'behind', 'n', redis.call('ZRANK', lane, id) or 0, 'priority', f[3] or '0',
    'group', g or '')
return out
