-- the @batch_open script: create a batch, open, with its callbacks.
-- KEYS[1] = the batch meta emq:{b:<id>}:meta, KEYS[2] = its pending set
-- ARGV = kind, record pairs ('complete', '{...}', 'success', ..., 'death', ...): each
-- callback's JSON record (its queue, task, arguments, options)
-- Reply: 1, or 0 (nothing written) when the batch exists.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'total', 0, 'completed', 0, 'dead', 0, 'cancelled', 0,
  'closed', 0)
for i = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], 'on_' .. ARGV[i], ARGV[i + 1]) end
return 1
