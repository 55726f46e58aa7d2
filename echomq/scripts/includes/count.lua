-- count(p, field, n): the queue's server-side counters emq:{q}:stats (HINCRBY), read by
-- jobs.stats: enqueued, completed, failed (each retry or death), retried, dead, cancelled,
-- corrupt (rows a claim could not run: includes/bury.lua; each is also counted dead).
local function count(p, field, n)
  redis.call('HINCRBY', p .. 'stats', field, n or 1)
end
