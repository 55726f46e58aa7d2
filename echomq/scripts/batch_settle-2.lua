-- the @batch_settle script: members ended (their ack, death or cancel landed on their own
-- queue's slot first): each is counted once and the callbacks due now fire.
-- KEYS[1] = the batch meta, KEYS[2] = its pending set
-- ARGV = id, outcome pairs; outcome 'completed', 'dead' or 'cancelled'
-- Reply: batch_reply (includes/batch.lua). A member no longer pending (counted already:
-- a notice repeated) changes nothing; callbacks are considered only when a count moved.
--@include batch
local fires, moved = {}, false
for i = 1, #ARGV, 2 do
  if redis.call('SREM', KEYS[2], ARGV[i]) == 1 then
    redis.call('HINCRBY', KEYS[1], ARGV[i + 1], 1)
    moved = true
  end
end
if moved then batch_fires(KEYS[1], KEYS[2], fires) end
return batch_reply(KEYS[1], KEYS[2], fires)
