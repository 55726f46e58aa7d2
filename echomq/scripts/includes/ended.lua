-- The bookkeeping every transition that ends a job runs, in the same script as the end
-- itself (so a counter, a release or a notification is never out of step with the row).
-- count(p, field, n): the queue's server-side counters emq:{q}:stats (HINCRBY), read by
-- jobs.stats: enqueued, completed, failed (each retry or death), retried, dead, cancelled.
--@include now
local function count(p, field, n)
  redis.call('HINCRBY', p .. 'stats', field, n or 1)
end
-- ended(p, jk, id, how): a job ended 'completed', 'dead' or 'cancelled'; called while its
-- row still exists (an ack that deletes the row calls it first).
local function ended(p, jk, id, how)
  count(p, how)
end
-- cancel_row(p, jk, id, now): end the job of row jk cancelled: state = cancelled,
-- cancelled_at = SERVER ms (now, or TIME), on the cancelled set scored by that ms (kept
-- and trimmed like the dead set). The caller has taken the id off every other set.
local function cancel_row(p, jk, id, now)
  now = now or now_ms()
  redis.call('HSET', jk, 'state', 'cancelled', 'cancelled_at', now)
  redis.call('HDEL', jk, 'cancel')
  redis.call('ZADD', p .. 'cancelled', now, id)
  ended(p, jk, id, 'cancelled')
end
