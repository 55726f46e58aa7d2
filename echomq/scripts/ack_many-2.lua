-- the @ack_many script: token-fenced completion of many jobs in hand, in one call.
-- KEYS[1] = active, KEYS[2] = the completed set
-- ARGV[1] = the queue base (rows derive from it), ARGV[2] = '1' keep rows / '0' delete,
-- ARGV[3..] = id1, token1, id2, token2, ...
-- Reply: an array with one entry per job: 1 completed, or the refusal @ack would give
-- ('EMQKIND ...', 'EMQSTALE job gone', 'EMQSTALE ack token mismatch',
-- 'EMQSTATE ack not active') as a string; a refused job is left exactly as it was.
--@include kind
--@include now
local p = ARGV[1]
local keep = ARGV[2] == '1'
local now = now_ms()
local out = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local jk = p .. 'job:' .. id
  local att = nil
  if is_job(id) then att = redis.call('HGET', jk, 'attempts') end
  if not is_job(id) then
    out[#out + 1] = KIND_ERROR
  elseif not att then
    out[#out + 1] = 'EMQSTALE job gone'
  elseif att ~= ARGV[i + 1] then
    out[#out + 1] = 'EMQSTALE ack token mismatch'
  elseif not redis.call('ZSCORE', KEYS[1], id) then
    out[#out + 1] = 'EMQSTATE ack not active'
  else
    redis.call('ZREM', KEYS[1], id)
    if keep then
      redis.call('HSET', jk, 'state', 'completed', 'completed_at', now)
      redis.call('ZADD', KEYS[2], now, id)
    else
      redis.call('DEL', jk)
    end
    out[#out + 1] = 1
  end
end
return out
