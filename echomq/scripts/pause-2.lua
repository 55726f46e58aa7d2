-- the @pause script: pause or resume a queue's claims.
-- KEYS[1] = the paused flag emq:{q}:paused, KEYS[2] = the wake list
-- ARGV[1] = '1' pause, '0' resume
-- Reply: 1 the flag changed, 0 it already was so.
-- A paused queue admits and promotes as usual; @claim hands out nothing while the flag
-- exists. Resume leaves a wake token so a consumer blocked on the wake list claims now.
--@include wake
if ARGV[1] == '1' then
  if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
  redis.call('SET', KEYS[1], '1')
  return 1
end
local was = redis.call('DEL', KEYS[1])
wake(KEYS[2])
return was
