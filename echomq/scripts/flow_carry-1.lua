-- the @flow_carry script: deliver flow children's ends to their parents, on the parents'
-- slot (the second half of a settlement whose first half, on the child's slot, wrote the
-- child's flow outbox entry; see includes/flow.lua).
-- KEYS[1] = the parents' queue's waiting-children set
-- ARGV[1] = the parents' queue base (rows, deps, kids, failed, flow, pending, schedule,
-- dead derive),
-- ARGV[2..] = per entry 7 values: parent id, child (the child's row key), seq (the child's
-- settlement number), how ('completed', 'dead', 'cancelled'), policy ('fail', 'ignore',
-- 'drop'), result ('' none), error ('' none)
-- Reply: an array with one entry per entry: 0 already carried (a replay or an older
-- settlement: nothing written), 1 carried, 2 carried and the parent released (its last
-- child settled: to pending, or its lane, at its priority; to the schedule when its
-- not_before, SERVER ms, is still ahead), 3 no parent row (it was
-- deleted: nothing to do), 4 carried and the parent failed (policy 'fail').
-- Exactly once: <base>flow:<pid> keeps per child the last seq carried (n:<child>), its
-- state (s:), result (r:) and error (e:); an entry at or below n: is dropped, and a child
-- leaves <base>deps:<pid> by SREM, counted only when that returned 1. A child that died
-- under 'fail' stays in deps and joins <base>failed:<pid>; the parent is dead-lettered
-- (flow_failed = 1, error names the child). If that child is revived and completes, it
-- leaves both sets and the parent, once deps and failed are empty, is released after all.
-- 'ignore' counts the death as a settlement (its state shows in children()); 'drop' also
-- counts it and marks it dropped (children() leaves it out). A parent that is cancelled,
-- running or done is never released again.
--@include kind
--@include lane
--@include ended
--@include lead
local p = ARGV[1]
local now = nil
local function release(jk, pid, state)
  if state == 'dead' then
    redis.call('ZREM', p .. 'dead', pid)
    redis.call('HDEL', jk, 'died_at', 'flow_failed')
    flow_kept(p, pid)
  else
    redis.call('ZREM', KEYS[1], pid)
  end
  -- a parent admitted with a delay or run-at waits on the schedule until then
  local nb = tonumber(redis.call('HGET', jk, 'not_before') or '')
  if nb then
    now = now or now_ms()
    if nb > now then
      redis.call('HSET', jk, 'state', 'scheduled')
      lead(p, nb)
      redis.call('ZADD', p .. 'schedule', nb, pid)
      return
    end
  end
  readmit(p, jk, pid)
end
-- parents' states read in this call (a fan-in brings hundreds of entries per parent)
local states = {}
local function carry(pid, ref, seq, how, policy, result, err)
  local jk = p .. 'job:' .. pid
  local state = states[pid]
  if state == nil then
    state = redis.call('HGET', jk, 'state') or false
    states[pid] = state
  end
  if not state then return 3 end
  local fk = p .. 'flow:' .. pid
  seq = tonumber(seq)
  if seq <= tonumber(redis.call('HGET', fk, 'n:' .. ref) or '0') then return 0 end
  redis.call('HSET', fk, 'n:' .. ref, seq, 's:' .. ref, how)
  local deps, failed = p .. 'deps:' .. pid, p .. 'failed:' .. pid
  local moved = 0
  if how == 'completed' then
    if result ~= '' then redis.call('HSET', fk, 'r:' .. ref, result) end
    redis.call('HDEL', fk, 'e:' .. ref)
    moved = redis.call('SREM', failed, ref) + redis.call('SREM', deps, ref)
  else
    if err ~= '' then redis.call('HSET', fk, 'e:' .. ref, err) end
    if policy == 'ignore' or policy == 'drop' then
      if policy == 'drop' then redis.call('HSET', fk, 's:' .. ref, 'dropped') end
      moved = redis.call('SREM', deps, ref)
    else
      redis.call('SADD', failed, ref)
      if state ~= 'waiting-children' then return 1 end
      now = now or now_ms()
      local cid = string.match(ref, ':job:(JOB.*)$') or ref
      local why = how == 'dead' and 'died' or how
      redis.call('ZREM', KEYS[1], pid)
      redis.call('HSET', jk, 'state', 'dead', 'died_at', now, 'flow_failed', '1',
        'error', 'child ' .. cid .. ' ' .. why .. (err ~= '' and (': ' .. err) or ''))
      redis.call('ZADD', p .. 'dead', now, pid)
      states[pid] = 'dead'
      count(p, 'failed')
      ended(p, jk, pid, 'dead')
      return 4
    end
  end
  -- only a child leaving deps or failed can open the gate
  if moved == 0 then return 1 end
  local waiting = state == 'waiting-children'
    or (state == 'dead' and redis.call('HGET', jk, 'flow_failed'))
  if waiting and redis.call('SCARD', deps) == 0 and redis.call('SCARD', failed) == 0 then
    release(jk, pid, state)
    states[pid] = 'pending'
    return 2
  end
  return 1
end
local out = {}
for i = 2, #ARGV, 7 do
  if not is_job(ARGV[i]) then return redis.error_reply(KIND_ERROR) end
end
for i = 2, #ARGV, 7 do
  out[#out + 1] = carry(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4],
    ARGV[i + 5], ARGV[i + 6])
end
return out
