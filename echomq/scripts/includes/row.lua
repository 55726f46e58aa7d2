-- new_row(jk, state, payload): write a fresh job row (state, attempts 0, payload) unless
-- the key exists; false when it does (nothing written). The caller checks the seen mark
-- first (includes/seen.lua: one id, or a bulk call's ids at once). One HSETEX NX
-- (Valkey 9) instead of EXISTS + HSET; a server without HSETEX gets the two (it is asked
-- once per script run: a bulk call does not pay a refused HSETEX per job).
local hsetex = true
local function new_row(jk, state, payload)
  if hsetex then
    local r = redis.pcall('HSETEX', jk, 'NX', 'FIELDS', 3, 'state', state, 'attempts', '0',
      'payload', payload)
    if type(r) == 'number' then return r == 1 end
    hsetex = false
  end
  if redis.call('EXISTS', jk) == 1 then return false end
  redis.call('HSET', jk, 'state', state, 'attempts', '0', 'payload', payload)
  return true
end
