-- the @upsert script: register, or explicitly update, a recurrence definition.
-- KEYS[1] = the repeat set, KEYS[2] = the repeat:<name> record
-- ARGV[1] = name, ARGV[2] = 'register' (an existing name is left alone) or 'upsert',
-- ARGV[3] = the first-run ms (HOST clock, priced by the caller) or '' when the definition
--           has no run at all (its end is already past),
-- ARGV[4..] = the whole definition as field, value pairs; '' means the field is absent.
-- Reply: 1 registered, 0 exists (the same definition, or mode 'register': nothing
-- written except re-arming a live record whose member was lost), 2 updated (a changed
-- definition: fields rewritten; the next run re-priced when a timing field changed).
-- Runtime fields (fired, last_id, last_at) survive an update; done is re-evaluated.
--@include park
local TIMING = {every_ms = true, cron = true, tz = true, start_at = true, end_at = true}
local name = ARGV[1]
local function spent()
  local limit = redis.call('HGET', KEYS[2], 'limit')
  local fired = tonumber(redis.call('HGET', KEYS[2], 'fired') or '0')
  return limit and fired >= tonumber(limit)
end
local function arm()
  if spent() then
    park(KEYS[1], KEYS[2], name, 'limit')
  else
    park_or_run(KEYS[1], KEYS[2], name, ARGV[3])
  end
end
local function write()
  for i = 4, #ARGV, 2 do
    if ARGV[i + 1] == '' then
      redis.call('HDEL', KEYS[2], ARGV[i])
    else
      redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    end
  end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  write()
  arm()
  return 1
end
local member = redis.call('ZSCORE', KEYS[1], name)
local done = redis.call('HGET', KEYS[2], 'done')
if ARGV[2] == 'register' then
  if not member and not done then arm() end
  return 0
end
local same, timing = true, false
for i = 4, #ARGV, 2 do
  if (redis.call('HGET', KEYS[2], ARGV[i]) or '') ~= ARGV[i + 1] then
    same = false
    if TIMING[ARGV[i]] then timing = true end
  end
end
if same then
  -- self-healing: a live record that lost its member is armed again
  if not member and not done then arm() end
  return 0
end
write()
redis.call('HDEL', KEYS[2], 'done')
if timing or done or not member then
  arm()
elseif spent() then
  park(KEYS[1], KEYS[2], name, 'limit')
end
return 2
