-- the @doctor script: check a queue's invariants for some subjects, each atomically (a live
-- queue moves on between calls, never inside one), and with ARGV[2] = '1' repair them.
-- KEYS[1] = the queue's pending set (any key of its slot: it routes the call)
-- ARGV[1] = the queue base, ARGV[2] = '1' repair / '0' report only, ARGV[3] = what:
--   'jobs':    ARGV[4..] = id1, lanes1, id2, lanes2, ... (lanes: the groups whose lane the
--              caller saw the id on, comma-joined, '' for none). Each id is in exactly the
--              set its row's state names (a pending grouped job: its group's lane) and in
--              no other; an index entry has a row; a row is a hash with a known state.
--   'groups':  ARGV[4..] = group names. A group's active count equals its jobs on active,
--              and the ring holds it iff it is ready (includes/ring.lua).
--   'parents': ARGV[4..] = ids of flow parents on waiting-children. A waiting parent
--              waits for at least one child, and its deps (the children still to settle)
--              are among its kids.
-- Reply: a flat array, per finding: subject, kind, what is wrong, what was repaired ('' when
-- nothing was, or nothing could be). Kinds: no-row, not-a-hash, unknown-state, missing,
-- stray, active-count, ring, no-children, foreign-dep.
-- Repairs: an entry without a row leaves its sets; a row that is not a hash, or whose state
-- is unknown, ends dead with the reason (includes/bury.lua, as a claim would); a row
-- missing from its state's set is put back there (pending: its lane or pending at its
-- priority; scheduled: due now; active: a lease expired now, so the reaper returns it;
-- an ended state: at its end stamp, else now); a stray entry (a second index) leaves that
-- set; a group's active count is set to its jobs on active and its ring place follows its
-- readiness; a parent waiting for no child is released (to the schedule when its
-- not_before is ahead), as the carry of its last child would.
-- Clock: SERVER (TIME) for the repairs' scores and the dead stamp.
--@include bury
--@include lane
--@include lead
--@include bound
local p, fix, what = ARGV[1], ARGV[2] == '1', ARGV[3]
local now = now_ms()
local out = {}
local function found(subject, kind, why, repaired)
  out[#out + 1] = subject
  out[#out + 1] = kind
  out[#out + 1] = why
  out[#out + 1] = repaired or ''
end
local SETS = {'pending', 'schedule', 'active', 'dead', 'cancelled', 'completed',
  'waiting-children', 'waiting'}
local STAMP = {dead = 'died_at', completed = 'completed_at', cancelled = 'cancelled_at'}
-- holders(id, lanes): the keys of every set and listed lane holding id, with their names
local function holders(id, lanes)
  local keys, names = {}, {}
  for _, s in ipairs(SETS) do
    if redis.call('ZSCORE', p .. s, id) then
      keys[#keys + 1], names[#names + 1] = p .. s, s
    end
  end
  for g in string.gmatch(lanes, '[^,]+') do
    local lk = p .. 'g:' .. g .. ':pending'
    if redis.call('ZSCORE', lk, id) then
      keys[#keys + 1], names[#names + 1] = lk, 'the lane of ' .. g
    end
  end
  return keys, names
end
-- unlist(key, id): take id off key; a lane's group then follows its readiness
local function unlist(key, id)
  redis.call('ZREM', key, id)
  if string.sub(key, 1, #p + 2) == p .. 'g:' then ring_sync(p, string.sub(key, #p + 3, -9)) end
end
local function check_job(id, lanes)
  local jk = p .. 'job:' .. id
  local kind = redis.call('TYPE', jk)['ok']
  local keys, names = holders(id, lanes)
  if kind == 'none' then
    if #keys == 0 then return end  -- gone meanwhile: nothing to say
    local why = 'an entry on ' .. table.concat(names, ', ') .. ' with no row'
    if not fix then return found(id, 'no-row', why) end
    for _, k in ipairs(keys) do unlist(k, id) end
    return found(id, 'no-row', why, 'removed from ' .. table.concat(names, ', '))
  end
  if kind ~= 'hash' then
    local why = 'the row is a ' .. kind .. ', not a hash'
    if not fix then return found(id, 'not-a-hash', why) end
    for _, k in ipairs(keys) do unlist(k, id) end
    bury(p, id, 'not a hash', now)
    return found(id, 'not-a-hash', why, 'ended dead; the key kept at ' .. p .. 'corrupt:' .. id)
  end
  local f = redis.call('HMGET', jk, 'state', 'group')
  local state, g = f[1], f[2]
  local set = state and STATE_SET[state]
  if set == nil then
    local why = state and ("unknown state '" .. state .. "'") or 'no state'
    if not fix then return found(id, 'unknown-state', why) end
    for _, k in ipairs(keys) do unlist(k, id) end
    bury(p, id, why, now)
    return found(id, 'unknown-state', why, 'ended dead with the reason')
  end
  local home = set and p .. set
  local home_name = set
  if state == 'pending' and g then
    home, home_name = p .. 'g:' .. g .. ':pending', 'the lane of ' .. g
  end
  local at_home = false
  for i, k in ipairs(keys) do
    if k == home then
      at_home = true
    else
      local why = "state '" .. state .. "' but also on " .. names[i]
      if fix then
        unlist(k, id)
        found(id, 'stray', why, 'removed from ' .. names[i])
      else
        found(id, 'stray', why)
      end
    end
  end
  -- the lanes listed were read before this script ran: a job that moved to its group's lane
  -- since is at home all the same
  if not at_home and home and redis.call('ZSCORE', home, id) then at_home = true end
  if at_home or not home then return end
  local why = "state '" .. state .. "' but not on " .. home_name
  if not fix then return found(id, 'missing', why) end
  local how
  if state == 'pending' then
    readmit(p, jk, id)
    how = 'put back on ' .. home_name
  elseif state == 'scheduled' then
    lead(p, now)
    redis.call('ZADD', home, now, id)
    how = 'put back on schedule, due now'
  elseif state == 'active' then
    redis.call('ZADD', home, now, id)
    how = 'put back on active with its lease expired (the reaper returns it)'
  else
    local at = tonumber(redis.call('HGET', jk, STAMP[state] or 'none') or '') or now
    if at ~= at or at > MAX_TIME_MS or at < -MAX_TIME_MS then at = now end
    redis.call('ZADD', home, at, id)
    how = 'put back on ' .. home_name
  end
  found(id, 'missing', why, how)
end
-- the active count of every group, read once per call (active holds the jobs in hand)
local active_of = nil
local function group_actives()
  if active_of then return active_of end
  active_of = {}
  for _, id in ipairs(redis.call('ZRANGE', p .. 'active', 0, -1)) do
    local g = redis.pcall('HGET', p .. 'job:' .. id, 'group')
    if type(g) == 'string' then active_of[g] = (active_of[g] or 0) + 1 end
  end
  return active_of
end
local function check_group(g)
  local mk = p .. 'g:' .. g
  local counted = group_actives()[g] or 0
  local kept = tonumber(redis.call('HGET', mk, 'active') or '0')
  if kept ~= counted then
    local why = 'active count ' .. tostring(redis.call('HGET', mk, 'active') or 0)
      .. ' but ' .. counted .. ' of its jobs are on active'
    if fix then
      redis.call('HSET', mk, 'active', counted)
      found(g, 'active-count', why, 'active count set to ' .. counted)
    else
      found(g, 'active-count', why)
    end
  end
  local ready = group_ready(p, g)
  local ringed = redis.call('ZSCORE', p .. 'ring', g) ~= false
  if ready ~= ringed then
    local why = ready and 'ready but not on the ring' or 'on the ring but not ready'
    if fix then
      ring_sync(p, g)
      found(g, 'ring', why, ready and 'put on the ring' or 'taken off the ring')
    else
      found(g, 'ring', why)
    end
  end
end
local function check_parent(id)
  local jk = p .. 'job:' .. id
  if redis.call('HGET', jk, 'state') ~= 'waiting-children' then return end
  local dk = p .. 'deps:' .. id
  local kids = {}
  for _, k in ipairs(redis.call('LRANGE', p .. 'kids:' .. id, 0, -1)) do kids[k] = true end
  for _, d in ipairs(redis.call('SMEMBERS', dk)) do
    if not kids[d] then
      local why = 'waits for ' .. d .. ', which is not one of its children'
      if fix then
        redis.call('SREM', dk, d)
        found(id, 'foreign-dep', why, 'no longer waits for it')
      else
        found(id, 'foreign-dep', why)
      end
    end
  end
  if redis.call('SCARD', dk) > 0 then return end
  local why = 'waits for its children, but none is left to settle'
  if not fix then return found(id, 'no-children', why) end
  redis.call('ZREM', p .. 'waiting-children', id)
  local nb = tonumber(redis.call('HGET', jk, 'not_before') or '')
  if nb and nb > now and nb <= MAX_TIME_MS then
    redis.call('HSET', jk, 'state', 'scheduled')
    lead(p, nb)
    redis.call('ZADD', p .. 'schedule', nb, id)
    found(id, 'no-children', why, 'released to the schedule (its not_before is ahead)')
  else
    readmit(p, jk, id)
    found(id, 'no-children', why, 'released')
  end
end
if what == 'jobs' then
  for i = 4, #ARGV, 2 do check_job(ARGV[i], ARGV[i + 1] or '') end
elseif what == 'groups' then
  for i = 4, #ARGV do check_group(ARGV[i]) end
elseif what == 'parents' then
  for i = 4, #ARGV do check_parent(ARGV[i]) end
else
  return redis.error_reply('ERR doctor: what must be jobs, groups or parents')
end
return out
