-- the @flow_turn script: one beat's turn at a queue's flow chores, in one round trip: hold
-- the flow-carrier lease and, if held, say what there is to do.
-- KEYS[1] = the flow-carrier lease emq:{q}:flow:carrier
-- ARGV[1] = the queue base (the flow outbox, the open-flows set and rows derive from it),
-- ARGV[2] = the owner token, ARGV[3] = the lease ms, ARGV[4] = at most this many roots
-- to roll back, ARGV[5] = ms a rollback handed out here is owned by this turn's caller
-- before another turn may hand it out again (it may die midway).
-- Reply: {held, outbox, roots...}: held 1 if the owner holds the lease now (0: another
-- carrier does; nothing else read or written), outbox the flow outbox's length (entries to
-- carry), and the roots of flows whose admission was not committed by its deadline
-- (<base>flows:open scored by SERVER ms, see @flow_admit) and that still wait for their
-- children: the admitting client died between levels, and the caller rolls them back
-- (flows.cancel; each root's error names why, written here). A root past its deadline
-- that no longer waits (its tree was whole: every child ran and released it) only leaves
-- the set.
--@include lease
--@include now
local p = ARGV[1]
if hold_lease(KEYS[1], ARGV[2], ARGV[3]) == 0 then
  return {0, 0}
end
local out = {1, redis.call('XLEN', p .. 'flow:outbox')}
local open = p .. 'flows:open'
local now = nil
if redis.call('EXISTS', open) == 1 then
  now = now_ms()
  local due = redis.call('ZRANGEBYSCORE', open, '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
  for _, id in ipairs(due) do
    local jk = p .. 'job:' .. id
    if redis.call('HGET', jk, 'state') == 'waiting-children' then
      redis.call('HSET', jk, 'error', 'flow admission not committed by its deadline (the '
        .. 'admitting client died between levels?): rolled back')
      redis.call('ZADD', open, now + tonumber(ARGV[5]), id)
      out[#out + 1] = id
    else
      redis.call('ZREM', open, id)
    end
  end
end
return out
