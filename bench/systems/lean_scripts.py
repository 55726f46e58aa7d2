"""A proposal, measured: leaner Lua for claim, ack and promote (bench variant ``lean``).

Same keys, same replies, same fencing as ``echomq/scripts/{claim,ack_many,promote}``; the
difference is the number of server commands per job. Each script does the per-job reads
and row writes it must, and one variadic command per set for the whole batch:

- claim: one ``ZPOPMIN pending k``, per job ``HMGET payload attempts`` + ``HSET attempts
  state``, one ``ZADD active`` for the batch (5 commands a job -> 2).
- ack (rows deleted): per job ``HGET attempts`` (the fence), one ``ZMSCORE active`` for the
  batch, one ``ZREM`` and one ``DEL`` for the batch (4 a job -> ~1).
- promote: one ``ZRANGEBYSCORE``, per job ``HGET group`` + ``HSET state``, one ``ZREM
  schedule`` and one ``ZADD pending`` for the batch (4 a job -> 2).

Not part of EchoMQ: the lead owns ``echomq/scripts``; this file shows what the change buys.
"""

from __future__ import annotations

NOW = """
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
local function wake(key)
  if redis.call('LLEN', key) == 0 then redis.call('RPUSH', key, '1') end
end
"""

# KEYS[1] = pending, KEYS[2] = active; ARGV[1] = base, ARGV[2] = lease ms, ARGV[3] = count
CLAIM = NOW + """
local p = ARGV[1]
local want = tonumber(ARGV[3])
local expires = now_ms() + tonumber(ARGV[2])
local popped = redis.call('ZPOPMIN', KEYS[1], want)
local out, zargs = {}, {}
for i = 1, #popped, 2 do
  local id = popped[i]
  local jk = p .. 'job:' .. id
  local row = redis.call('HMGET', jk, 'payload', 'attempts')
  if row[1] then
    local att = tonumber(row[2] or '0') + 1
    redis.call('HSET', jk, 'attempts', att, 'state', 'active')
    zargs[#zargs + 1] = expires
    zargs[#zargs + 1] = id
    out[#out + 1] = id
    out[#out + 1] = att
    out[#out + 1] = row[1]
  end
end
if #zargs > 0 then redis.call('ZADD', KEYS[2], unpack(zargs)) end
if #popped == 2 * want and redis.call('ZCARD', KEYS[1]) > 0 then wake(p .. 'wake') end
return out
"""

# KEYS[1] = active; ARGV[1] = base, ARGV[2..] = id1, token1, ... (rows deleted)
ACK = """
local p = ARGV[1]
local out, ids, rows, slot = {}, {}, {}, {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local k = #out + 1
  if string.sub(id, 1, 3) ~= 'JOB' then
    out[k] = 'EMQKIND job id must be JOB-namespaced'
  else
    local att = redis.call('HGET', p .. 'job:' .. id, 'attempts')
    if not att then out[k] = 'EMQSTALE job gone'
    elseif att ~= ARGV[i + 1] then out[k] = 'EMQSTALE ack token mismatch'
    else out[k] = 0; ids[#ids + 1] = id; slot[#ids] = k end
  end
end
if #ids > 0 then
  local scores = redis.call('ZMSCORE', KEYS[1], unpack(ids))
  local live = {}
  for j, id in ipairs(ids) do
    if scores[j] then
      live[#live + 1] = id
      rows[#rows + 1] = p .. 'job:' .. id
      out[slot[j]] = 1
    else
      out[slot[j]] = 'EMQSTATE ack not active'
    end
  end
  if #live > 0 then
    redis.call('ZREM', KEYS[1], unpack(live))
    redis.call('DEL', unpack(rows))
  end
end
return out
"""

# KEYS[1] = schedule, KEYS[2] = pending; ARGV[1] = base, ARGV[2] = batch
PROMOTE = NOW + """
local p = ARGV[1]
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms(), 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then return 0 end
local flat = {}
for _, id in ipairs(due) do
  local jk = p .. 'job:' .. id
  local g = redis.call('HGET', jk, 'group')
  if g then
    redis.call('ZADD', p .. 'g:' .. g .. ':pending', 0, id)
  else
    flat[#flat + 1] = 0
    flat[#flat + 1] = id
  end
  redis.call('HSET', jk, 'state', 'pending')
end
redis.call('ZREM', KEYS[1], unpack(due))
if #flat > 0 then
  redis.call('ZADD', KEYS[2], unpack(flat))
  wake(p .. 'wake')
end
return #due
"""
