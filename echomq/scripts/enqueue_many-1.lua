-- the @enqueue_many script: admit many jobs claimable now, in one call.
-- KEYS[1] = pending
-- ARGV[1] = the queue base (rows and the wake list derive from it),
-- ARGV[2..] = id1, payload1, id2, payload2, ...
-- Reply: an array with one entry per job, 1 admitted or 0 duplicate (row exists).
-- Every id is checked before the first write: one foreign id refuses the whole call with
-- EMQKIND and nothing is written. Each admission is the @enqueue transition.
--@include kind
--@include admit
--@include chunks
local p = ARGV[1]
if not all_jobs(2, 2) then
  return redis.error_reply(KIND_ERROR)
end
local out, batch = {}, {}
for i = 2, #ARGV, 2 do
  out[#out + 1] = admit(p, ARGV[i], ARGV[i + 1], 'now', 0, {batch = batch})
end
local admitted = batch[KEYS[1]]
if admitted then
  in_chunks(admitted, 2000, function(...) redis.call('ZADD', KEYS[1], ...) end)
  wake(p .. 'wake')
  count(p, 'enqueued', #admitted / 2)
end
return out
