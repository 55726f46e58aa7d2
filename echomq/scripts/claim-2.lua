-- the @claim script: lease the next waiting jobs: flat pending and the ready groups in turn.
-- KEYS[1] = pending, KEYS[2] = active
-- ARGV[1] = the queue base, ARGV[2] = lease ms, ARGV[3] = how many at most (default 1),
-- ARGV[4] = a claim id the client chose ('' or absent: none)
-- Reply: a flat array id1, token1, payload1, id2, ... (empty when nothing is claimable).
-- The token is the row's attempts after the increment; every later verb on the job in
-- hand is fenced on it. The lease expires at SERVER now + lease ms (the active score).
-- Order: pending pops by score (priority, then mint order). When the ring of ready groups
-- (<base>ring) is not empty, claims alternate between pending and the ring (the turn is
-- kept on <base>turn across calls); the group at the ring's head gives its lane's first
-- job, its active count rises, and it goes to the back of the ring if still ready (a
-- group of weight w, groups.set_weight, first takes w consecutive turns at the head).
-- Nothing is claimed while the queue is paused (<base>paused) or blocked
-- (<base>blocked_until, a queue-level rate_limited). A queue rate (<base>rate: max, ms)
-- and a group rate (g:<group> rate_max, rate_ms) are sliding-window logs of claim starts
-- on the SERVER clock (<base>starts, g:<group>:starts, bucketed by ms: includes/window.lua):
-- never more than max starts in any window of ms; a group whose window is full waits on
-- <base>gwait until it reopens.
-- Groups on gwait whose time has come rejoin the ring first. A group without its own
-- limit or rate takes the queue's defaults (<base>gdefaults, includes/ring.lua).
-- A queue cap (<base>limit, an integer): live leases on active (scored by lease expiry,
-- counted from SERVER now, so a crashed holder's slot frees when its lease lapses) plus
-- this claim never exceed it, across every worker.
-- A row marked cancel = 1 (cancel requested while it ran, then sent back) ends cancelled,
-- not claimed. Nothing popped is dropped: a row the claim cannot run (no row, no payload,
-- not a hash, no or an unknown state, a state whose set does not hold it, attempts that
-- are no number) ends dead with error 'corrupt row: <why>', counted as corrupt
-- (includes/bury.lua), and the claim takes the next job in its place. An entry whose row
-- lives on the set its state names (a second index of a job not lost) is only removed.
-- A row past its deadline ends expired, not claimed; a claimed row drops its deadline
-- (includes/expiry.lua).
-- A claim id makes the claim safe to retry when its reply is lost: the ids and tokens it
-- leased are kept on <base>claim:<claim id> for the lease (PX lease ms), and a claim
-- sent again with that id leases nothing new: it answers those jobs again, each that is
-- still active under the same token (EMQ.CLAIM records a first use the same way and
-- hands a replay to this script).
--@include now
--@include ring
--@include ended
--@include window
--@include chunks
--@include bury
--@include expiry
local p = ARGV[1]
local want = tonumber(ARGV[3] or '1')
local now = now_ms()
local expires = now + tonumber(ARGV[2])
local ck = (ARGV[4] and ARGV[4] ~= '') and (p .. 'claim:' .. ARGV[4]) or nil
if ck then
  local held = redis.call('HGETALL', ck)
  if #held > 0 then
    local again = {}
    for i = 1, #held, 2 do
      local row = redis.pcall('HMGET', p .. 'job:' .. held[i], 'payload', 'attempts', 'state')
      if not row.err and row[3] == 'active' and row[2] == held[i + 1] then
        again[#again + 1] = held[i]
        again[#again + 1] = tonumber(held[i + 1])
        again[#again + 1] = row[1]
      end
    end
    return again
  end
end
-- windows and blocks move on even while paused, so a consumer told by next_due_ms that
-- one reopened finds it reopened (and does not wake again for it)
local qrate = redis.call('HMGET', p .. 'rate', 'max', 'ms')
local used = qrate[1] and in_window(p .. 'starts', tonumber(qrate[2]), now) or 0
reopen(p, now)
if redis.call('EXISTS', p .. 'paused') == 1 or redis.call('EXISTS', p .. 'blocked_until') == 1 then
  return {}
end
if qrate[1] then
  local room = tonumber(qrate[1]) - used
  if room < want then want = room end
  if want <= 0 then return {} end
end
local cap = tonumber(redis.call('GET', p .. 'limit') or '')
if cap then
  local room = cap - redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
  if room < want then want = room end
  if want <= 0 then return {} end
end
local out, leased = {}, {}
-- start(id, waiting): lease the id popped off `waiting` ('pending' or 'its lane'); 1
-- started, 0 not (a cancelled row, a row buried as corrupt, a stray entry)
local function start(id, waiting)
  local jk = p .. 'job:' .. id
  local deadline = deadline_passed(p, jk, id, now)
  if deadline then return 0 end
  local row = redis.pcall('HMGET', jk, 'payload', 'attempts', 'state', 'cancel')
  if not row.err and row[4] then
    cancel_row(p, jk, id, now)
    return 0
  end
  local why = unrunnable(p, id, waiting, row)
  if why then
    if why ~= 'stray' then bury(p, id, why, now) end
    return 0
  end
  local att = tonumber(row[2] or '0') + 1
  redis.call('HSET', jk, 'attempts', att, 'state', 'active')
  if deadline == false then started(p, jk, id) end
  leased[#leased + 1] = expires
  leased[#leased + 1] = id
  out[#out + 1] = id
  out[#out + 1] = att
  out[#out + 1] = row[1]
  return 1
end
local function count_out() return #out / 3 end
-- from_pending(n): up to n flat jobs; false once pending is empty
local function from_pending(n)
  local goal = count_out() + n
  while count_out() < goal do
    local popped = redis.call('ZPOPMIN', KEYS[1], goal - count_out())
    if #popped == 0 then return false end
    for i = 1, #popped, 2 do start(popped[i], 'pending') end
  end
  return true
end
-- from_ring(): one job from the group whose turn it is; false once the ring is empty.
-- The group's meta is read once; a group still ready goes to the back of the ring (a new
-- sequence from <base>ringseq, kept in seq and written back once), else it leaves it.
local seq, gd = nil, nil
local function from_ring()
  while true do
    local head = redis.call('ZRANGE', p .. 'ring', 0, 0)
    if #head == 0 then return false end
    local g = head[1]
    local mk = p .. 'g:' .. g
    local lane = mk .. ':pending'
    local m = redis.call('HMGET', mk, 'rate_max', 'rate_ms', 'active', 'limit', 'weight')
    if not (m[1] and m[4]) then
      gd = gd or redis.call('HMGET', p .. 'gdefaults', 'rate_max', 'rate_ms', 'limit')
      if not m[1] then m[1], m[2] = gd[1], gd[2] end
      m[4] = m[4] or gd[3]
    end
    local active, limit = tonumber(m[3] or '0'), tonumber(m[4] or '')
    local log, rmax, rms = mk .. ':starts', tonumber(m[1] or ''), tonumber(m[2] or '')
    local used = rmax and in_window(log, rms, now) or 0
    local open = not rmax or used < rmax
    local got = 0
    if open then
      local popped = redis.call('ZPOPMIN', lane, 1)
      if #popped > 0 then
        got = start(popped[1], 'its lane')
        if got == 1 then
          active = redis.call('HINCRBY', mk, 'active', 1)
          if rmax then
            record(log, now, 1)
            open = used + 1 < rmax
          end
        end
      end
    end
    if not open then
      -- the window is full: the group waits until its oldest start leaves it
      redis.call('ZADD', p .. 'gwait', reopens_at(log, rms), g)
    end
    if open and (not limit or active < limit) and redis.call('ZCARD', lane) > 0 then
      -- a group of weight w keeps the head for w consecutive turns (its streak), then goes
      -- to the back: over a round, ready groups get turns in proportion to their weights
      local w = tonumber(m[5] or '1') or 1
      if got == 1 and w > 1 and redis.call('HINCRBY', mk, 'streak', 1) < w then
        -- stays at the head: its score is left as it is
      else
        if w > 1 then redis.call('HDEL', mk, 'streak') end
        seq = (seq or tonumber(redis.call('GET', p .. 'ringseq') or '0')) + 1
        redis.call('ZADD', p .. 'ring', seq, g)
      end
    else
      if m[5] then redis.call('HDEL', mk, 'streak') end
      redis.call('ZREM', p .. 'ring', g)
    end
    if got == 1 then return true end
  end
end
if redis.call('ZCARD', p .. 'ring') == 0 then
  from_pending(want)
else
  local flat_turn = redis.call('GET', p .. 'turn') ~= 'g'
  local pending_left, ring_left = true, true
  while count_out() < want and (pending_left or ring_left) do
    if (flat_turn and pending_left) or not ring_left then
      pending_left = from_pending(1)
    else
      ring_left = from_ring()
    end
    flat_turn = not flat_turn
  end
  redis.call('SET', p .. 'turn', flat_turn and 'f' or 'g')
end
in_chunks(leased, 2000, function(...) redis.call('ZADD', KEYS[2], ...) end)
if seq then redis.call('SET', p .. 'ringseq', seq) end
if qrate[1] and #out > 0 then record(p .. 'starts', now, #out / 3) end
if ck and #out > 0 then
  local kept = {}
  for i = 1, #out, 3 do
    kept[#kept + 1] = out[i]
    kept[#kept + 1] = out[i + 1]
  end
  in_chunks(kept, 2000, function(...) redis.call('HSET', ck, ...) end)
  redis.call('PEXPIRE', ck, ARGV[2])
end
-- work left behind wakes the next blocked consumer
if count_out() == want and (redis.call('ZCARD', KEYS[1]) > 0 or redis.call('ZCARD', p .. 'ring') > 0) then
  wake(p .. 'wake')
end
return out
