-- the @metronome script: hold, renew or release a queue's metronome lease.
-- KEYS[1] = the lease key emq:{q}:metronome
-- ARGV[1] = the owner token, ARGV[2] = lease ms (two beats), ARGV[3] = 'hold' or 'release'
-- Reply for 'hold': 1 renewed (the owner already held it), 2 acquired (it was free),
-- 0 another owner holds it (nothing written). Reply for 'release': 1 released, 0 not held.
-- The lease lives on the SERVER clock (PX), so a holder that dies stops renewing and the
-- key lapses without anyone's host clock being consulted.
--@include lease
if ARGV[3] == 'release' then
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return 1
  end
  return 0
end
return hold_lease(KEYS[1], ARGV[1], ARGV[2])
