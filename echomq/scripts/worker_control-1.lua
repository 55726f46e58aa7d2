-- the @worker_control script: ask live workers to quiet (stop claiming) or stop (drain, exit).
-- KEYS[1] = emq:{workers}:index
-- ARGV[1] = the registration prefix, emq:{workers}:w:, ARGV[2] = 'quiet' or 'stop',
-- ARGV[3] = a worker id, or '*' for every live worker
-- Reply: the ids asked (empty when no live worker has that id). Each one's control list
-- (<prefix><id>:control) gets the request, kept as long as its registration lives, and
-- its registration records it as `requested`; the worker pops the list (it blocks on it
-- between heartbeats) and acts at once.
-- Derived (same slot): each registration and control key, from ARGV[1].
local ids
if ARGV[3] == '*' then
  ids = redis.call('ZRANGE', KEYS[1], 0, -1)
else
  ids = {ARGV[3]}
end
local asked = {}
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  local ttl = redis.call('PTTL', key)
  if ttl > 0 then
    redis.call('RPUSH', key .. ':control', ARGV[2])
    redis.call('PEXPIRE', key .. ':control', ttl)
    redis.call('HSET', key, 'requested', ARGV[2])
    asked[#asked + 1] = id
  end
end
return asked
