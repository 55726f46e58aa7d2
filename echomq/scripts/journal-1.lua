-- the @journal script: a durable job's steps, in the order they were recorded. Reads only.
-- KEYS[1] = the job row
-- Reply: {now, name, meta, result, name, meta, result, ...}: SERVER now, then each step's
-- name, its '<ordinal>:<state>:<at_ms>:<until_ms>' (includes/journal.lua) and its result
-- (nil when none), ordered by ordinal. {now} alone for a job with no steps or no row.
-- Bounded by the row's fields (one HGETALL).
--@include now
local out = {now_ms()}
local row = redis.call('HGETALL', KEYS[1])
local found = {}
for i = 1, #row, 2 do
  local f = row[i]
  if string.sub(f, 1, 5) == 'step:' then
    found[#found + 1] = {tonumber(string.match(row[i + 1], '^(%d+):') or '0'), string.sub(f, 6),
      row[i + 1]}
  end
end
table.sort(found, function(a, b) return a[1] < b[1] end)
local outs = {}
for i = 1, #row, 2 do
  if string.sub(row[i], 1, 4) == 'out:' then outs[string.sub(row[i], 5)] = row[i + 1] end
end
for _, s in ipairs(found) do
  out[#out + 1] = s[2]
  out[#out + 1] = s[3]
  out[#out + 1] = outs[s[2]] or false
end
return out
