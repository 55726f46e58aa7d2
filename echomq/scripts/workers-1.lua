-- the @workers script: the live worker registry, read whole (and swept).
-- KEYS[1] = emq:{workers}:index (zset: worker id -> its last heartbeat, SERVER ms)
-- ARGV[1] = the registration prefix, emq:{workers}:w:
-- Reply: {now, id, {field, value, ...}, busy, id, ...}: SERVER now, then per live worker
-- its id, its registration and its busy snapshot ('' for none), in heartbeat order. An
-- index entry whose registration expired (its worker stopped beating: killed, frozen or
-- cut off for two heartbeat periods) is dropped from the index here.
-- Derived (same slot): each registration and busy key, from ARGV[1].
--@include now
local out = {now_ms()}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local fields = redis.call('HGETALL', ARGV[1] .. id)
  if #fields == 0 then
    redis.call('ZREM', KEYS[1], id)
  else
    out[#out + 1] = id
    out[#out + 1] = fields
    out[#out + 1] = redis.call('GET', ARGV[1] .. id .. ':busy') or ''
  end
end
return out
