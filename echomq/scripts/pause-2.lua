-- the @pause script: pause or resume a queue's claims.
-- KEYS[1] = the paused flag emq:{q}:paused, KEYS[2] = the wake list
-- ARGV[1] = '1' pause, '0' resume, ARGV[2] = with '1', optionally the pause's end
-- (SERVER ms; '' or absent: until resumed)
-- Reply: 1 the flag changed, 0 it already was so.
-- A paused queue admits and promotes as usual; @claim hands out nothing while the flag
-- exists. Resume leaves a wake token so a consumer blocked on the wake list claims now.
-- A pause with an end is the flag set to expire at that instant (PXAT, the SERVER clock):
-- the queue resumes by itself then, and a token on the due list (includes/lead.lua) makes
-- the idle consumers re-read their next due instant (jobs.next_due_ms counts the flag's
-- end), so they claim at the instant instead of at their next beat. A pause on a paused
-- queue sets its end (or, without one, makes it last until resumed). An end at or before
-- SERVER now resumes the queue.
-- Derived (same slot): the due list (KEYS[2] with 'wake' replaced by 'due').
--@include wake
--@include now
local function resume()
  local was = redis.call('DEL', KEYS[1])
  wake(KEYS[2])
  return was
end
if ARGV[1] == '1' then
  local was = redis.call('EXISTS', KEYS[1])
  local until_ms = tonumber(ARGV[2] or '')
  if until_ms then
    if until_ms <= now_ms() then
      resume()
      return 0
    end
    redis.call('SET', KEYS[1], '1', 'PXAT', until_ms)
    wake(string.sub(KEYS[2], 1, -5) .. 'due')
    return 1 - was
  end
  if was == 1 then
    redis.call('PERSIST', KEYS[1])
    return 0
  end
  redis.call('SET', KEYS[1], '1')
  return 1
end
return resume()
