-- the @schedule_many script: admit many jobs onto the schedule set, in one call.
-- KEYS[1] = the schedule set
-- ARGV[1] = the queue base (rows derive from it),
-- ARGV[2..] = id1, payload1, mode1, value1, id2, ... (mode 'in' or 'at', as @schedule)
-- Reply: an array with one entry per job, 1 admitted or 0 duplicate (row exists).
-- Every id is checked before the first write: one foreign id refuses the whole call with
-- EMQKIND and nothing is written. 'in' prices on the SERVER clock, read once per call.
--@include kind
--@include now
--@include chunks
local p = ARGV[1]
if not all_jobs(2, 4) then
  return redis.error_reply(KIND_ERROR)
end
local now = now_ms()
local out, admitted = {}, {}
for i = 2, #ARGV, 4 do
  local id = ARGV[i]
  local jk = p .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then
    out[#out + 1] = 0
  else
    local score
    if ARGV[i + 2] == 'in' then
      score = now + tonumber(ARGV[i + 3])
    else
      score = tonumber(ARGV[i + 3])
    end
    redis.call('HSET', jk, 'state', 'scheduled', 'attempts', '0', 'payload', ARGV[i + 1])
    admitted[#admitted + 1] = score
    admitted[#admitted + 1] = id
    out[#out + 1] = 1
  end
end
in_chunks(admitted, 2000, function(...) redis.call('ZADD', KEYS[1], ...) end)
return out
