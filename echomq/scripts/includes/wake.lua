-- wake(key): leave one token on a queue's wake list so a consumer blocked on it
-- (BLPOP with a one-beat timeout) claims now instead of at its next beat. At most one
-- token is kept: a woken consumer that leaves work behind pushes the next one.
local function wake(key)
  if redis.call('LLEN', key) == 0 then
    redis.call('RPUSH', key, '1')
  end
end
