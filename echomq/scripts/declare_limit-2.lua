-- the @declare_limit script: a worker applies the queue cap its app's tasks declare
-- (@app.task(queue_limit=n)), as declare_rate does for a rate.
-- KEYS[1] = the queue's cap <base>limit, KEYS[2] = the declared marker (the n a worker last
-- applied)
-- ARGV[1] = n ('' when the app declares no cap for the queue)
-- Reply: {outcome, the cap in force or ''}, outcome one of 'applied', 'same', 'kept' (the
-- cap in force is not the one a worker applied: an operator set it with `echomq limit`,
-- so it stays), 'cleared' (the app no longer declares the cap a worker applied), 'none'.
-- `echomq limit Q none` deletes both, so the next worker start applies the declared cap.
--@include declared
return declared(redis.call('GET', KEYS[1]) or '', redis.call('GET', KEYS[2]) or '', ARGV[1],
  function() redis.call('DEL', KEYS[1], KEYS[2]) end,
  function()
    redis.call('SET', KEYS[1], ARGV[1])
    redis.call('SET', KEYS[2], ARGV[1])
  end)
