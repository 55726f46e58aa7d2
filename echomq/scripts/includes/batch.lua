-- A batch (emq:{b:<id>}:meta and :pending, one slot apart from its members' queues):
-- meta holds total, completed, dead, cancelled, closed (0/1), the callbacks (on_complete,
-- on_success, on_death: JSON records) and a fired_<kind> flag per callback; pending is the
-- set of member ids not yet ended. Counts move only when SREM took a member off pending,
-- so a notice delivered twice (a settler retrying a lost reply) never counts twice.
-- batch_fires(meta, pending, out): append the callbacks due now to out as kind, record
-- pairs, each flagged fired in the same call (HSETNX: at most once). No callback fires
-- while the batch is open. on_death: at the first dead member; on_complete: every member
-- ended; on_success: every member completed. A batch whose on_complete fired keeps its
-- keys for a week (batch_info still reads them).
local BATCH_KEEP_S = 7 * 86400
local function batch_fires(meta, pending, out)
  local m = redis.call('HMGET', meta, 'closed', 'dead', 'total', 'completed',
    'on_complete', 'on_success', 'on_death')
  if m[1] ~= '1' then return end
  local function fire(kind, record)
    if record and redis.call('HSETNX', meta, 'fired_' .. kind, 1) == 1 then
      out[#out + 1] = kind
      out[#out + 1] = record
    end
  end
  if tonumber(m[2] or '0') > 0 then fire('death', m[7]) end
  if redis.call('SCARD', pending) == 0 then
    if tonumber(m[4] or '0') == tonumber(m[3] or '0') then fire('success', m[6]) end
    fire('complete', m[5])
    redis.call('HSETNX', meta, 'ended', 1)
    redis.call('EXPIRE', meta, BATCH_KEEP_S)
    redis.call('EXPIRE', pending, BATCH_KEEP_S)
  end
end
-- batch_reply(meta, pending, fires): total, pending, completed, dead, cancelled, closed,
-- then the kind, record pairs of the callbacks to enqueue.
local function batch_reply(meta, pending, fires)
  local m = redis.call('HMGET', meta, 'total', 'completed', 'dead', 'cancelled', 'closed')
  local out = {tonumber(m[1] or '0'), redis.call('SCARD', pending), tonumber(m[2] or '0'),
    tonumber(m[3] or '0'), tonumber(m[4] or '0'), tonumber(m[5] or '0')}
  for _, v in ipairs(fires) do out[#out + 1] = v end
  return out
end
