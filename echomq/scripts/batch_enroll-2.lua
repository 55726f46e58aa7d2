-- the @batch_enroll script: members join a batch, before they are admitted (so a member
-- that ends at once finds itself enrolled, and a batch job's additions are enrolled while
-- it still counts as pending: the batch never looks ended in between).
-- KEYS[1] = the batch meta, KEYS[2] = its pending set
-- ARGV = the members' job ids
-- Reply: the batch's total. An error when the batch does not exist, or ended (its
-- on_complete fired: a member added then would never be heard).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('EMQSTATE batch absent')
end
if redis.call('HGET', KEYS[1], 'ended') then
  return redis.error_reply('EMQSTATE batch ended')
end
local added = 0
for i = 1, #ARGV, 5000 do
  added = added + redis.call('SADD', KEYS[2], unpack(ARGV, i, math.min(i + 4999, #ARGV)))
end
return redis.call('HINCRBY', KEYS[1], 'total', added)
