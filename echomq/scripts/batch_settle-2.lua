-- the @batch_settle script: members ended (their ack, death or cancel landed on their own
-- queue's slot first): each is counted once and the callbacks due now fire.
-- KEYS[1] = the batch meta, KEYS[2] = its pending set
-- ARGV = groups of outcome, n, then n member ids; outcome 'completed', 'dead', 'cancelled'
-- or 'expired' (a notice of one loop turn's ends sends one group per outcome)
-- Reply: batch_reply (includes/batch.lua). A member no longer pending (counted already:
-- a notice repeated) changes nothing: a group's count rises by what its SREM took off
-- pending; callbacks are considered only when a count moved.
--@include batch
--@include chunks
local fires, moved = {}, false
local i = 1
while i <= #ARGV do
  local outcome, n = ARGV[i], tonumber(ARGV[i + 1])
  local ids = {}
  for j = i + 2, i + 1 + n do ids[#ids + 1] = ARGV[j] end
  local took = 0
  in_chunks(ids, 5000, function(...)
    took = took + redis.call('SREM', KEYS[2], ...)
  end)
  if took > 0 then
    redis.call('HINCRBY', KEYS[1], outcome, took)
    moved = true
  end
  i = i + 2 + n
end
if moved then batch_fires(KEYS[1], KEYS[2], fires) end
return batch_reply(KEYS[1], KEYS[2], fires)
