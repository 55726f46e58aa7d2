-- the @schedule_many script: admit many jobs onto the schedule set, in one call.
-- KEYS[1] = the schedule set
-- ARGV[1] = the queue base (rows derive from it),
-- ARGV[2..] = id1, payload1, mode1, value1, id2, ... (mode 'in' or 'at', as @schedule)
-- Reply: an array with one entry per job, 1 admitted or 0 duplicate (row exists).
-- Every id is checked before the first write: one foreign id refuses the whole call with
-- EMQKIND and nothing is written. 'in' prices on the SERVER clock, read once per call.
--@include kind
--@include admit
--@include chunks
local p = ARGV[1]
if not all_jobs(2, 4) then
  return redis.error_reply(KIND_ERROR)
end
local now = now_ms()
local out, batch = {}, {}
for i = 2, #ARGV, 4 do
  local mode = ARGV[i + 2] == 'in' and 'in' or 'at'
  out[#out + 1] = admit(p, ARGV[i], ARGV[i + 1], mode, ARGV[i + 3], {now = now, batch = batch})
end
local admitted = batch[KEYS[1]] or {}
lead_many(p, admitted)
in_chunks(admitted, 2000, function(...) redis.call('ZADD', KEYS[1], ...) end)
if #admitted > 0 then count(p, 'enqueued', #admitted / 2) end
return out
