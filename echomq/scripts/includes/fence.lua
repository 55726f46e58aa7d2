-- fence(row, id, token, verb, active): the check every verb on a job in hand runs before
-- it writes. Returns nil when the caller holds the job, else the refusal text (the caller
-- answers redis.error_reply(text), or keeps it in its slot in a bulk reply):
--   EMQKIND job id must be JOB-namespaced   the id is foreign
--   EMQSTALE job gone                       no row
--   EMQSTALE <verb> token mismatch          the row's attempts is not the caller's token
--   EMQSTATE <verb> not active              (only when active is given) the lease is gone
-- The token is compared as bytes, as the native twins compare it.
--@include kind
local function fence(row, id, token, verb, active)
  if not is_job(id) then return KIND_ERROR end
  local att = redis.call('HGET', row, 'attempts')
  if not att then return 'EMQSTALE job gone' end
  if att ~= token then return 'EMQSTALE ' .. verb .. ' token mismatch' end
  if active and not redis.call('ZSCORE', active, id) then
    return 'EMQSTATE ' .. verb .. ' not active'
  end
  return nil
end
