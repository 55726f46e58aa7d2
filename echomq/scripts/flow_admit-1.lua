-- the @flow_admit script: admit the nodes of a flow (a tree of jobs) that live in one queue.
-- KEYS[1] = the queue's waiting-children set (emq:{q}:waiting-children)
-- ARGV[1] = the queue base (rows, deps, kids, pending, lanes, schedule, unique keys, watch
-- lists and the open-flows set derive from it),
-- ARGV[2] = the commit grace in ms ('' = none): given with the root of a tree, which is
-- then put on <base>flows:open scored by SERVER now + grace until the admitting client
-- commits (ZREM) after its last level; a root still there (and still waiting for its
-- children) past that instant is rolled back by the carry leg (@flow_turn),
-- ARGV[3..] = per node 13 values: id, payload, mode ('now', 'in' or 'at'), value (the
-- delay or run-at ms), priority ('' = 0), group ('' = none), parent (the parent's row key
-- emq:{pq}:job:<pid>, '' for the root), policy ('fail', 'ignore', 'drop'; '' = fail: what
-- the parent does when this node dies or is cancelled), kids (the child row keys joined by
-- newlines, '' for a leaf), notify (ms to keep the done token its end leaves for waiters;
-- '' = none), unique (a unique key, '' = none), unique_for (ms, '' = none), same (the id
-- of a job of this queue whose end this leaf shares, '' = none: the node is linked to it,
-- as to the owner of its unique key; a chain step feeding a group's members feeds one
-- member as a job and the others through such links, written after the job).
-- Reply: an array with one entry per node: 1 admitted, 0 duplicate (the id has a row, or
-- was deleted at its ack moments ago: includes/seen.lua; nothing written for it), or
-- the id of the live job that owns the node's unique key (for
-- a same node: the job it shares): the node is then linked to that job (a stub row, state = linked, on the owner's watch list;
-- see flow_watched in includes/flow.lua): the owner's end counts as the node's, and a
-- linked parent's children are not admitted (the caller leaves them out).
-- A leaf is admitted as @enqueue / @schedule admit it ('in'/'at' put it on the schedule).
-- A node with kids is written state = waiting-children (and flow = 1), on KEYS[1] scored
-- by SERVER ms, with <base>deps:<id> (the SET of kids not yet settled, each removed
-- exactly once by @flow_carry) and <base>kids:<id> (the LIST of kids in order, for
-- children()) filled here, before any kid exists: the caller admits a tree level by
-- level, parents first, so no kid can end before its parent knows how many it waits for,
-- and the parent is released only by the carry of its last kid. A parent's 'in'/'at' is
-- a not-before instant (SERVER ms, on the row as not_before): released before it, the
-- parent goes to the schedule instead of pending. Every id is checked before the first
-- write (EMQKIND, nothing written), and so is every due (includes/bound.lua).
--@include kind
--@include admit
--@include chunks
--@include bound
local p = ARGV[1]
local N = 13
if not all_jobs(3, N) then
  return redis.error_reply(KIND_ERROR)
end
local now = now_ms()
local refused = dues_refusal('FLOW', 3, N, 2, now)
if refused then return redis.error_reply(refused) end
-- link(id, jk, payload, owner): the node becomes a stub that settles when owner does; an
-- owner that already ended (it holds the key only for its unique_for window) settles it
-- at once. The caller writes parent and policy on the row first.
local function link(id, jk, payload, owner)
  redis.call('HSET', jk, 'state', 'linked', 'linked', owner, 'payload', payload)
  local ok = p .. 'job:' .. owner
  local st = redis.call('HGET', ok, 'state')
  local f = redis.call('HMGET', jk, 'parent', 'policy')
  if st == 'completed' or not st then
    -- its row is gone or kept completed: the node is completed now, with its result
    flow_settled(p, jk, id, 'completed', f[1], f[2], nil, owner)
    redis.call('DEL', jk)
    return
  end
  redis.call('RPUSH', p .. 'watch:' .. owner, id)
  redis.call('HSET', ok, 'watched', '1')
  if st == 'dead' or st == 'cancelled' then
    -- settled as the owner ended; a revive of the owner settles it again, later
    local err = redis.call('HGET', ok, 'error')
    local why = 'linked job ' .. owner .. ' ' .. (st == 'dead' and 'died' or st)
      .. (err and (': ' .. err) or '')
    flow_settled(p, jk, id, st, f[1], f[2], why, owner)
    redis.call('HSET', jk, 'error', why)
  end
end
-- leaves' ZADDs are collected per set and flushed variadic at the end (admit's batch)
local out, batch = {}, {}
for i = 3, #ARGV, N do
  local id, payload, kids, parent = ARGV[i], ARGV[i + 1], ARGV[i + 8], ARGV[i + 6]
  local unique = given(ARGV[i + 10])
  local jk = p .. 'job:' .. id
  local mode = ARGV[i + 2]
  if mode ~= 'now' and mode ~= 'in' then mode = 'at' end
  -- the flow fields, written with the row ('fail' is the default policy: not written)
  local fields = {}
  if parent ~= '' then
    fields = {'parent', parent}
    if ARGV[i + 7] ~= '' then fields[3], fields[4] = 'policy', ARGV[i + 7] end
  end
  local r
  if redis.call('EXISTS', jk) == 1 or seen_recently(p, id) then
    r = 0
  elseif ARGV[i + 12] ~= '' then
    r = ARGV[i + 12]
  elseif kids == '' then
    r = admit(p, id, payload, mode, ARGV[i + 3],
      {priority = ARGV[i + 4], group = ARGV[i + 5], notify = ARGV[i + 9], unique = unique,
       unique_for = ARGV[i + 11], now = now, batch = batch, fresh = true, fields = fields})
  else
    r = unique and unique_owner(p, unique) or 1
    if r == 1 then
      redis.call('HSET', jk, 'state', 'waiting-children', 'attempts', '0', 'payload', payload,
        'flow', '1', unpack(fields))
      local pri = tonumber(ARGV[i + 4]) or 0
      if pri ~= 0 then redis.call('HSET', jk, 'priority', pri) end
      if ARGV[i + 5] ~= '' then redis.call('HSET', jk, 'group', ARGV[i + 5]) end
      if ARGV[i + 9] ~= '' then redis.call('HSET', jk, 'notify', ARGV[i + 9]) end
      if unique then take_unique(p, jk, id, unique, ARGV[i + 11], now) end
      if mode ~= 'now' then
        redis.call('HSET', jk, 'not_before', price(mode, ARGV[i + 3], now))
      end
      redis.call('ZADD', KEYS[1], now, id)
      local refs = {}
      for ref in string.gmatch(kids, '[^\n]+') do refs[#refs + 1] = ref end
      in_chunks(refs, 1000, function(...) redis.call('SADD', p .. 'deps:' .. id, ...) end)
      in_chunks(refs, 1000, function(...) redis.call('RPUSH', p .. 'kids:' .. id, ...) end)
      count(p, 'enqueued')
      if parent == '' and ARGV[2] ~= '' then
        redis.call('ZADD', p .. 'flows:open', now + tonumber(ARGV[2]), id)
      end
    end
  end
  -- a linked root is no job at all: the caller is handed the owner's id, as an enqueue is
  if r ~= 0 and r ~= 1 and parent ~= '' then
    redis.call('HSET', jk, unpack(fields))  -- first: a stub settled at once reads them
    link(id, jk, payload, r)
  end
  out[#out + 1] = r
end
-- admit() counted the lane admissions it did not batch; flush counts the batched ones
flush(p, batch)
return out
