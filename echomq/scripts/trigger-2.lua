-- the @trigger script: run one occurrence of a registration now, outside its schedule.
-- KEYS[1] = the repeat set, KEYS[2] = the repeat:<name> record
-- ARGV[1] = name, ARGV[2] = the queue base (the occurrence's row derives from it),
-- ARGV[3] = the occurrence id (minted on the host)
-- Reply: 1 enqueued (claimable now, whatever the overlap policy: an operator's "run
-- now"), 0 no record has that name (nothing written). Refusal: EMQKIND.
-- The schedule is not moved: the score, fired, last_at and limit stay as they are; the
-- occurrence becomes the record's last_id, so the overlap policy of the next due slot
-- sees it.
--@include kind
--@include admit
if not is_job(ARGV[3]) then
  return redis.error_reply(KIND_ERROR)
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  return 0
end
local template = redis.call('HGET', KEYS[2], 'template') or ''
admit(ARGV[2], ARGV[3], template, 'now', 0, {})
redis.call('HSET', KEYS[2], 'last_id', ARGV[3])
return 1
