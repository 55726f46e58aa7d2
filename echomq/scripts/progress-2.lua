-- the @progress script: the holder records how far a job in hand got.
-- KEYS[1] = the job row, KEYS[2] = active
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = the value (a JSON text)
-- Reply: 1 (HSET progress). Refusals (nothing written): EMQKIND, EMQSTALE job gone,
-- EMQSTALE progress token mismatch, EMQSTATE progress not active.
--@include fence
local refused = fence(KEYS[1], ARGV[1], ARGV[2], 'progress', KEYS[2])
if refused then return redis.error_reply(refused) end
redis.call('HSET', KEYS[1], 'progress', ARGV[3])
return 1
