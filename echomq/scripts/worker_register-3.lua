-- the @worker_register script: a worker process joins the live worker registry.
-- KEYS[1] = emq:{workers}:index (zset: worker id -> its last heartbeat, SERVER ms),
-- KEYS[2] = emq:{workers}:w:<id> (hash: the registration), KEYS[3] = its busy key
-- ARGV[1] = the worker id, ARGV[2] = ttl ms (two heartbeat periods),
-- ARGV[3..] = the registration's fields and values, in pairs
-- Reply: the SERVER ms it registered at. The hash is written whole (registering again,
-- after the old registration expired, replaces it) with seen = now and started = now
-- unless the fields carry one; the hash expires ttl ms from now unless a heartbeat
-- renews it, so a worker that dies drops out of the registry on its own. The busy key
-- starts empty.
--@include now
local now = now_ms()
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[2], unpack(ARGV, 3))
redis.call('HSET', KEYS[2], 'seen', now)
redis.call('HSETNX', KEYS[2], 'started', now)
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
redis.call('ZADD', KEYS[1], now, ARGV[1])
return now
