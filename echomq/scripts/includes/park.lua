-- park(set, record, name, reason): a registration with no further run keeps its record
-- (so re-registering the same definition stays a no-op), notes why on it ('done' =
-- 'ended' or 'limit'), and parks its member at +inf where no due read reaches it.
local function park(set, record, name, reason)
  redis.call('HSET', record, 'done', reason)
  redis.call('ZADD', set, '+inf', name)
end
