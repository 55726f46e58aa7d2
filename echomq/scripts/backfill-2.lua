-- the @backfill script: fire a registration's slots in a past range, each at most once.
-- KEYS[1] = the repeat set, KEYS[2] = the repeat:<name> record
-- ARGV[1] = name, ARGV[2] = the queue base (occurrence rows derive from it),
-- ARGV[3..] = per slot, oldest first, three values: the occurrence id (minted on the
-- host), '' (claimable now), the slot (ms)
-- Reply: the ids enqueued, in slot order; {} when no record has that name. Refusal:
-- EMQKIND (nothing written).
-- A slot already fired (by the Pump or an earlier backfill; remembered on <record>:slots,
-- includes/occur.lua) fires nothing, so a backfill of the same range twice fires once.
-- Each occurrence follows the record's overlap policy like a scheduled one (with
-- buffer_all they run one after another). The schedule is not moved and the occurrences do
-- not count towards the limit.
--@include kind
--@include occur
for i = 3, #ARGV, 3 do
  if not is_job(ARGV[i]) then
    return redis.error_reply(KIND_ERROR)
  end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {}
end
local template = redis.call('HGET', KEYS[2], 'template') or ''
local out = {}
for i = 3, #ARGV, 3 do
  local slot = ARGV[i + 2]
  if not redis.call('ZSCORE', KEYS[2] .. ':slots', slot) then
    if occur(ARGV[2], KEYS[2], ARGV[i], template, ARGV[i + 1]) > 0 then
      remember(KEYS[2], slot)
      out[#out + 1] = ARGV[i]
    end
  end
end
return out
