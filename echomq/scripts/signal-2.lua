-- the @signal script: a signal's sender half of its rendezvous, in the signal key's own
-- slot (emq:{sig:<key>}).
-- KEYS[1] = the stored signal (emq:{sig:<key>}:value), KEYS[2] = the queues with waiters
-- on the key (emq:{sig:<key>}:queues)
-- ARGV[1] = the payload, ARGV[2] = how long to keep it for late waiters (ms, >= 1)
-- Reply: {now, queue, queue, ...}: SERVER now and every queue registered on KEYS[2]; the
-- sender then runs @resume on each queue and removes the entries scored before now (a
-- queue registered at or after now stays: its waiter read the stored payload itself).
-- The payload replaces any stored before; it expires TTL ms from now (SERVER clock).
-- Refusal (nothing written): ERR EMQ.SIGNAL ttl must be a positive integer.
--@include now
local ttl = tonumber(ARGV[2])
if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
  return redis.error_reply('ERR EMQ.SIGNAL ttl must be a positive integer')
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
local out = {now_ms()}
for _, q in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do out[#out + 1] = q end
return out
