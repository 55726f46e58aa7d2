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
--@include kind
--@include row
--@include now
--@include count
--@include chunks
--@include lead
--@include bound
local p = ARGV[1]
if not all_jobs(2, 4) then
  return redis.error_reply(KIND_ERROR)
end
local now = now_ms()
local refused = dues_refusal('SCHEDULE', 2, 4, 2, now)
if refused then return redis.error_reply(refused) end
local rows = p .. 'job:'
local out, members, n = {}, {}, 0
for i = 2, #ARGV, 4 do
  local id = ARGV[i]
  if new_row(rows .. id, 'scheduled', ARGV[i + 1]) then
    out[#out + 1] = 1
    local due = tonumber(ARGV[i + 3])
    if ARGV[i + 2] == 'in' then due = now + due end
    members[n + 1], members[n + 2] = due, id
    n = n + 2
  else
    out[#out + 1] = 0
  end
end
if n > 0 then
  lead_many(p, members)
  in_chunks(members, 2000, function(...) redis.call('ZADD', KEYS[1], ...) end)
  count(p, 'enqueued', n / 2)
end
return out
