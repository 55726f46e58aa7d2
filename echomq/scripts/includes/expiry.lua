-- Deadlines. A job admitted with one (expires) carries it on its row as SERVER ms and
-- sits on <base>deadlines scored by it. A job not started by then never runs: it ends
-- expired (on <base>expired, scored by the SERVER ms it expired, kept and trimmed like
-- the dead set) in the claim that pops it, the promote that releases it or the beat's
-- sweep (@expire), wherever it waited. A job that starts drops its deadline: a retry or
-- a reaped lease runs it again (a running job's bound is its timeout, not its deadline).
--@include ended
-- expire_row(p, jk, id, now): end the job of row jk expired at SERVER ms now. The caller
-- has taken the id off the set it waited on.
local function expire_row(p, jk, id, now)
  redis.call('HSET', jk, 'state', 'expired', 'expired_at', now)
  redis.call('ZADD', p .. 'expired', now, id)
  redis.call('ZREM', p .. 'deadlines', id)
  ended(p, jk, id, 'expired')
end
-- deadline_passed(p, jk, id, now): at a claim or a promote of the job of row jk, off its
-- set: true when its deadline is at or before now (the job is expired here), false when
-- it is still ahead (a claim then drops it: started()), nil when it has none.
local function deadline_passed(p, jk, id, now)
  -- pcall: a key that is not a hash is the caller's to judge, not this check's
  local got = redis.pcall('HGET', jk, 'expires')
  local at = type(got) ~= 'table' and tonumber(got or '') or nil
  if not at then return nil end
  if at <= now then
    expire_row(p, jk, id, now)
    return true
  end
  return false
end
-- started(p, jk, id): a claimed job met its deadline; it keeps none from now on.
local function started(p, jk, id)
  if redis.call('HDEL', jk, 'expires') == 1 then
    redis.call('ZREM', p .. 'deadlines', id)
  end
end
