-- the @worker_unregister script: a worker leaves the live worker registry (a clean exit).
-- KEYS[1] = emq:{workers}:index, KEYS[2] = emq:{workers}:w:<id>, KEYS[3] = its busy key,
-- KEYS[4] = its control list
-- ARGV[1] = the worker id
-- Reply: 1 removed, 0 it had no registration (expired already). Every key goes, so no
-- view lists the worker after its exit.
local had = redis.call('DEL', KEYS[2])
redis.call('DEL', KEYS[3], KEYS[4])
redis.call('ZREM', KEYS[1], ARGV[1])
return had
