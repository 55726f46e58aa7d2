-- the @discard script: delete a job that is not running (an operator's "delete").
-- KEYS[1] = the job row, KEYS[2] = its kept result (emq:{q}:result:<id>)
-- ARGV[1] = the queue base (emq:{q}:), ARGV[2] = id
-- Reply: 1 deleted, 0 no row. Refusals (nothing written): EMQKIND,
-- EMQSTATE discard active (a running job is cancelled, never deleted under its holder),
-- EMQSTATE discard waiting-children (a flow parent is cancelled with its subtree).
-- Row, index entry, result and the unique key the job owns go together, so no ghost id is
-- left on a set and no unique key keeps refusing admissions for a job that is gone.
-- A flow child deleted before it ended is recorded on the flow outbox as cancelled (error
-- 'discarded'), so its parent follows its policy instead of waiting for ever (so is a
-- linked flow node's stub, and the nodes linked to a deleted waiting job); a deleted
-- flow parent's bookkeeping starts its expiry.
-- Derived (same slot): the state's set, the group's lane and the unique key, from ARGV[1];
-- for a waiting job (a durable wait) its deadline and its signal's waiters too.
--@include kind
--@include ring
--@include flow
if not is_job(ARGV[2]) then
  return redis.error_reply(KIND_ERROR)
end
local st = redis.call('HGET', KEYS[1], 'state')
if not st then
  return 0
end
if st == 'active' or st == 'waiting-children' then
  return redis.error_reply('EMQSTATE discard ' .. st)
end
local p = ARGV[1]
local group = redis.call('HGET', KEYS[1], 'group')
if st == 'pending' and group then
  redis.call('ZREM', p .. 'g:' .. group .. ':pending', ARGV[2])
  ring_sync(p, group)
elseif st == 'scheduled' then
  redis.call('ZREM', p .. 'schedule', ARGV[2])
elseif st == 'waiting' then
  -- a durable wait: off every wait index too (its signal's waiters, its timeout)
  redis.call('ZREM', p .. 'waiting', ARGV[2])
  redis.call('ZREM', p .. 'deadlines', ARGV[2])
  local key = redis.call('HGET', KEYS[1], 'wait_key')
  if key then redis.call('SREM', p .. 'signal:' .. key, ARGV[2]) end
else
  redis.call('ZREM', p .. st, ARGV[2])
end
local f = redis.call('HMGET', KEYS[1], 'parent', 'policy', 'flow', 'watched')
local waiting = st == 'pending' or st == 'scheduled' or st == 'waiting-children'
  or st == 'waiting'
if f[1] and (waiting or st == 'linked') then
  flow_settled(p, KEYS[1], ARGV[2], 'cancelled', f[1], f[2], 'discarded')
end
if f[3] then flow_ended(p, ARGV[2]) end
if f[4] and waiting then flow_watched(p, ARGV[2], 'cancelled', 'discarded') end
local unique = redis.call('HGET', KEYS[1], 'unique')
if unique and redis.call('GET', p .. 'unique:' .. unique) == ARGV[2] then
  redis.call('DEL', p .. 'unique:' .. unique)
end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
