-- the @standing script: what a drain round would find to do on a queue, read at one
-- SERVER instant (read only). For tests: no production transition calls it, the testing
-- kit alone does (testing.drain, between its rounds).
-- KEYS[1] = pending, KEYS[2] = active
-- ARGV[1] = the queue base (the ring, schedule, gwait, deadlines, flow outbox, open-flows
-- set and stats derive from it)
-- Reply: {claimable, scheduled, legs, expired}: claimable 1 when jobs wait on pending or a
-- ready group's lane (the ring); scheduled 1 when the schedule holds jobs; legs 1 when a
-- beat's recovery legs have work now: a lease lapsed (reap), a scheduled run-at, a gwait
-- reopening or a deadline is at or before now (promote, the deadline sweep), the flow
-- outbox holds completions or a flow admission missed its deadline (the flow carrier);
-- expired the queue's expired counter (emq:{q}:stats).
--@include now
local p = ARGV[1]
local now = now_ms()
local function due(key)
  local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return head[2] ~= nil and tonumber(head[2]) <= now
end
local claimable = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', p .. 'ring') > 0
local scheduled = redis.call('EXISTS', p .. 'schedule') == 1
local legs = due(KEYS[2]) or due(p .. 'schedule') or due(p .. 'gwait') or due(p .. 'deadlines')
  or redis.call('XLEN', p .. 'flow:outbox') > 0 or due(p .. 'flows:open')
return {claimable and 1 or 0, scheduled and 1 or 0, legs and 1 or 0,
  tonumber(redis.call('HGET', p .. 'stats', 'expired') or '0')}
