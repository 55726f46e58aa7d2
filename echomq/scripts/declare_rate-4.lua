-- the @declare_rate script: a worker applies the rate its app's tasks declare for a queue.
-- KEYS[1] = the queue's rate hash (max, ms), KEYS[2] = the declared marker (a string:
-- the "max/ms" a worker last applied), KEYS[3] = the starts log, KEYS[4] = its bucket counts
-- ARGV[1] = max ('' when the app declares no rate for the queue), ARGV[2] = per ms
-- Reply: {outcome, the rate in force as "max/ms" or ''}, outcome one of
--   'applied' (written), 'same' (already in force), 'kept' (the rate in force is not the
--   one a worker applied: an operator set it with `echomq rate`, so it stays),
--   'cleared' (the app no longer declares the rate a worker applied: removed), 'none'.
-- The rate hash keeps exactly the fields `echomq rate` writes (max, ms); the marker tells
-- a declared rate from an operator's. `echomq rate Q none` deletes both, so the next
-- worker start applies the declared rate again.
--@include declared
local r = redis.call('HMGET', KEYS[1], 'max', 'ms')
local current = ''
if r[1] then current = r[1] .. '/' .. (r[2] or '') end
local want = ARGV[1] == '' and '' or (ARGV[1] .. '/' .. ARGV[2])
return declared(current, redis.call('GET', KEYS[2]) or '', want,
  function() redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4]) end,
  function()
    redis.call('HSET', KEYS[1], 'max', ARGV[1], 'ms', ARGV[2])
    redis.call('SET', KEYS[2], want)
  end)
