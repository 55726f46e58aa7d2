-- flow_settled(p, jk, id, how, parent, policy, err): a flow child (its row jk names a
-- parent row key; policy and err are the row's, read by ended()) ended 'completed',
-- 'dead' or 'cancelled'. Its parent lives under another queue's hash tag, so on a cluster
-- on another shard, and no script may write there; the end is recorded instead on this
-- queue's flow outbox <base>flow:outbox (a stream on the child's own slot), written by the
-- same script that settles the child, and the Pump carries it to the parent's slot
-- (@flow_carry). Each settlement bumps the row's fseq and the entry carries it, so the
-- carry counts a settlement once however often it is delivered (a Pump killed between
-- carry and XDEL, two Pumps racing) and ignores an older one delivered late (a child dead,
-- revived and completed is carried as completed). The result is the one the ack wrote to
-- <base>result:<id> (if any; <base>result:<src> for a node linked to job src, see
-- flow_watched); a death or cancel carries the row's last error.
local function flow_settled(p, jk, id, how, parent, policy, err, src)
  local seq = redis.call('HINCRBY', jk, 'fseq', 1)
  local entry = {'child', id, 'parent', parent, 'how', how, 'seq', seq,
    'policy', policy or 'fail'}
  if how == 'completed' then
    local r = redis.call('GET', p .. 'result:' .. (src or id))
    if r then
      entry[#entry + 1] = 'result'
      entry[#entry + 1] = r
    end
  elseif err then
    entry[#entry + 1] = 'error'
    entry[#entry + 1] = err
  end
  redis.call('XADD', p .. 'flow:outbox', '*', unpack(entry))
end
-- A flow parent's bookkeeping (<base>deps:<id>, kids:<id>, flow:<id>, failed:<id>) outlives
-- the parent by FLOW_KEEP_MS once it ends (children() and `echomq job` read it), and no
-- longer: flow_ended(p, id) sets that expiry, flow_kept(p, id) lifts it again (a parent
-- failed by its children and brought back by a revived child).
local FLOW_KEEP_MS = 7 * 24 * 3600 * 1000
local function flow_keys(p, id)
  return {p .. 'deps:' .. id, p .. 'kids:' .. id, p .. 'flow:' .. id, p .. 'failed:' .. id}
end
local function flow_ended(p, id)
  for _, k in ipairs(flow_keys(p, id)) do redis.call('PEXPIRE', k, FLOW_KEEP_MS) end
end
local function flow_kept(p, id)
  for _, k in ipairs(flow_keys(p, id)) do redis.call('PERSIST', k) end
end
-- A flow node whose unique key a live job owned when it was admitted is not a job of its
-- own: it is a stub row (state = linked, linked = the owner's id) on the owner's watch
-- list <base>watch:<owner>, and the owner's row carries watched = 1. flow_watched(p, id,
-- how, err) runs when that owner ends: every node linked to it settles the same way, with
-- the owner's result or error, so the node's parent waits for the owner and never for a
-- job that was not written. A completed owner deletes its stubs and its list; a dead or
-- cancelled one keeps them (a revive of the owner settles them again, later) for
-- FLOW_KEEP_MS.
local function flow_watched(p, id, how, err)
  local wk = p .. 'watch:' .. id
  local why = nil
  if how ~= 'completed' then
    why = 'linked job ' .. id .. ' ' .. (how == 'dead' and 'died' or how)
      .. (err and (': ' .. err) or '')
  end
  for _, nid in ipairs(redis.call('LRANGE', wk, 0, -1)) do
    local nk = p .. 'job:' .. nid
    local f = redis.call('HMGET', nk, 'parent', 'policy')
    if f[1] then
      flow_settled(p, nk, nid, how, f[1], f[2], why, id)
      if how == 'completed' then
        redis.call('DEL', nk)
      else
        redis.call('HSET', nk, 'error', why)
        redis.call('PEXPIRE', nk, FLOW_KEEP_MS)
      end
    end
  end
  if how == 'completed' then
    redis.call('DEL', wk)
  else
    redis.call('PEXPIRE', wk, FLOW_KEEP_MS)
  end
end
