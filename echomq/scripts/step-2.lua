-- the @step script: record a durable step's result on the job in hand, once.
-- KEYS[1] = the job row, KEYS[2] = active
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = the step name, ARGV[4] = the result (bytes)
-- Reply: {fresh, state, at_ms, until_ms, result}: {1, 'done', now, '', result} recorded
-- by this call at SERVER ms now; {0, state, at_ms, until_ms, result} a step of that name
-- was recorded before: kept as it was (the first result wins; a sleep or a wait of that
-- name answers its own state), nothing written. The job stays in hand either way.
-- Refusals (nothing written): EMQKIND, EMQSTALE job gone, EMQSTALE step token mismatch,
-- EMQSTATE step not active (the lease is gone: a stale holder records nothing).
--@include fence
--@include now
--@include journal
local refused = fence(KEYS[1], ARGV[1], ARGV[2], 'step', KEYS[2])
if refused then return redis.error_reply(refused) end
local s = step_of(KEYS[1], ARGV[3])
if s then return step_reply(KEYS[1], ARGV[3], 0, s.state, s.at, s.till) end
local now = now_ms()
new_step(KEYS[1], ARGV[3], 'done', now, '', ARGV[4])
return {1, 'done', now, '', ARGV[4]}
