-- park(set, record, name, reason): a registration with no further run keeps its record
-- (so re-registering the same definition stays a no-op), notes why on it ('done' =
-- 'ended' or 'limit'), and parks its member at +inf where no due read reaches it.
local function park(set, record, name, reason)
  redis.call('HSET', record, 'done', reason)
  redis.call('ZADD', set, '+inf', name)
end
-- park_or_run(set, record, name, at): the member's next run at `at` (HOST ms), or parked
-- 'ended' when there is none (`at` = ''): what both a fire and an upsert do once the
-- record knows its next slot.
local function park_or_run(set, record, name, at)
  if at == '' then
    park(set, record, name, 'ended')
  else
    redis.call('ZADD', set, tonumber(at), name)
  end
end
