-- the @schedule_many script: admit many jobs onto the schedule set, in one call.
-- KEYS[1] = the schedule set
-- ARGV[1] = the queue base (rows derive from it),
-- ARGV[2..] = id1, payload1, mode1, value1, id2, ... (mode 'in' or 'at', as @schedule)
-- Reply: an array with one entry per job, 1 admitted or 0 duplicate (row exists).
-- Every id is checked before the first write: one foreign id refuses the whole call with
-- EMQKIND and nothing is written; so does one due that is not a finite number or prices a
-- score past year 9999 (includes/bound.lua). 'in' prices on the SERVER clock, read once per call.
-- Each admission is the @schedule transition without options (a job with options goes
-- through @admit_many): the row (state scheduled), then the id on the schedule set at its
-- run-at. The per-job part is one command (new_row); one variadic ZADD and one counter
-- bump serve the whole call.
--@include many
--@include count
--@include chunks
--@include lead
local p = ARGV[1]
local now, refused = checked_dues(4)
if refused then return redis.error_reply(refused) end
local out, members, n = new_rows(p, 4, 'scheduled', function(i)
  local due = tonumber(ARGV[i + 3])
  if ARGV[i + 2] == 'in' then due = now + due end
  return due
end)
if n > 0 then
  lead_many(p, members)
  in_chunks(members, 2000, function(...) redis.call('ZADD', KEYS[1], ...) end)
  count(p, 'enqueued', n / 2)
end
return out
