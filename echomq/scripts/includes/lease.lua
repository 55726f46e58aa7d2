-- hold_lease(key, owner, ms): take or renew the lease at key for owner: 1 renewed (owner
-- already held it), 2 acquired (it was free), 0 another owner holds it (nothing written).
-- The lease lives on the SERVER clock (PX), so a holder that dies stops renewing and the
-- key lapses without anyone's host clock being consulted.
local function hold_lease(key, owner, ms)
  local cur = redis.call('GET', key)
  if cur == owner then
    redis.call('PEXPIRE', key, tonumber(ms))
    return 1
  end
  if not cur then
    redis.call('SET', key, owner, 'PX', tonumber(ms))
    return 2
  end
  return 0
end
