-- the @batch_close script: the `with app.batch(...)` block ended: the batch is closed, and
-- the callbacks due now fire (an empty batch fires on_complete and on_success at once).
-- KEYS[1] = the batch meta, KEYS[2] = its pending set
-- Reply: batch_reply (includes/batch.lua): the counts, then the callbacks to enqueue;
-- an error when the batch does not exist.
--@include batch
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('EMQSTATE batch absent')
end
local fires = {}
if redis.call('HGET', KEYS[1], 'closed') ~= '1' then
  redis.call('HSET', KEYS[1], 'closed', 1)
  batch_fires(KEYS[1], KEYS[2], fires)
end
return batch_reply(KEYS[1], KEYS[2], fires)
