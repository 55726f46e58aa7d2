-- the @enqueue_many script: admit many jobs claimable now, in one call.
-- KEYS[1] = pending
-- ARGV[1] = the queue base (rows and the wake list derive from it),
-- ARGV[2..] = id1, payload1, id2, payload2, ...
-- Reply: an array with one entry per job, 1 admitted or 0 duplicate (row exists).
-- Every id is checked before the first write: one foreign id refuses the whole call with
-- EMQKIND and nothing is written. Each admission is the @enqueue transition without
-- options (a job with options goes through @admit_many): the row, then the id on pending
-- at score 0. The per-job part is one command (new_row); what every job shares is paid
-- once per call: one variadic ZADD, one wake token, one counter bump.
--@include many
--@include wake
--@include count
--@include chunks
local p = ARGV[1]
if not all_jobs(2, 2) then
  return redis.error_reply(KIND_ERROR)
end
local out, members, n = new_rows(p, 2, 'pending', function() return 0 end)
if n > 0 then
  in_chunks(members, 2000, function(...) redis.call('ZADD', KEYS[1], ...) end)
  wake(p .. 'wake')
  count(p, 'enqueued', n / 2)
end
return out
