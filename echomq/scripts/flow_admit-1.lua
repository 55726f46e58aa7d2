-- the @flow_admit script: admit the nodes of a flow (a tree of jobs) that live in one queue.
-- KEYS[1] = the queue's waiting-children set (emq:{q}:waiting-children)
-- ARGV[1] = the queue base (rows, deps, kids, pending, lanes and schedule derive from it),
-- ARGV[2..] = per node 10 values: id, payload, mode ('now', 'in' or 'at'; a parent
-- ignores it), value (the delay or run-at ms), priority ('' = 0), group ('' = none), parent
-- (the parent's row key emq:{pq}:job:<pid>, '' for the root), policy ('fail', 'ignore',
-- 'drop'; '' = fail: what the parent does when this node dies or is cancelled), kids (the
-- child row keys joined by newlines, '' for a leaf), notify (ms to keep the done token
-- its end leaves for waiters, as admit's notify; '' = none).
-- Reply: an array with one entry per node, 1 admitted or 0 duplicate (the id has a row:
-- nothing written for it).
-- A leaf is admitted as @enqueue / @schedule admit it. A node with kids is written
-- state = waiting-children (and flow = 1), on KEYS[1] scored by SERVER ms, with <base>deps:<id> (the SET
-- of kids not yet settled, each removed exactly once by @flow_carry) and <base>kids:<id>
-- (the LIST of kids in order, for children()) filled here, before any kid exists: the
-- caller admits a tree level by level, parents first, so no kid can end before its
-- parent knows how many it waits for, and the parent is released only by the carry of its
-- last kid. Every id is checked before the first write (EMQKIND, nothing written).
--@include kind
--@include admit
--@include chunks
local p = ARGV[1]
if not all_jobs(2, 10) then
  return redis.error_reply(KIND_ERROR)
end
local now = now_ms()
-- leaves' ZADDs are collected per set and flushed variadic at the end (admit's batch)
local out, batch = {}, {}
for i = 2, #ARGV, 10 do
  local id, kids = ARGV[i], ARGV[i + 8]
  local jk = p .. 'job:' .. id
  local r
  if kids == '' then
    local mode = ARGV[i + 2]
    if mode ~= 'now' and mode ~= 'in' then mode = 'at' end
    r = admit(p, id, ARGV[i + 1], mode, ARGV[i + 3],
      {priority = ARGV[i + 4], group = ARGV[i + 5], notify = ARGV[i + 9], now = now,
       batch = batch})
  elseif redis.call('EXISTS', jk) == 1 then
    r = 0
  else
    redis.call('HSET', jk, 'state', 'waiting-children', 'attempts', '0', 'payload', ARGV[i + 1],
      'flow', '1')
    local pri = tonumber(ARGV[i + 4]) or 0
    if pri ~= 0 then redis.call('HSET', jk, 'priority', pri) end
    if ARGV[i + 5] ~= '' then redis.call('HSET', jk, 'group', ARGV[i + 5]) end
    if ARGV[i + 9] ~= '' then redis.call('HSET', jk, 'notify', ARGV[i + 9]) end
    redis.call('ZADD', KEYS[1], now, id)
    local refs = {}
    for ref in string.gmatch(kids, '[^\n]+') do refs[#refs + 1] = ref end
    in_chunks(refs, 1000, function(...) redis.call('SADD', p .. 'deps:' .. id, ...) end)
    in_chunks(refs, 1000, function(...) redis.call('RPUSH', p .. 'kids:' .. id, ...) end)
    count(p, 'enqueued')
    r = 1
  end
  if r == 1 and ARGV[i + 6] ~= '' then
    redis.call('HSET', jk, 'parent', ARGV[i + 6])
    if ARGV[i + 7] ~= '' then redis.call('HSET', jk, 'policy', ARGV[i + 7]) end
  end
  out[#out + 1] = r
end
-- admit() counted the lane admissions it did not batch; flush counts the batched ones
flush(p, batch)
return out
