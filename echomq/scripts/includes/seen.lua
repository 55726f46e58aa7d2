-- The "seen" mark (issue 37): an ack that deletes its row leaves the id on <base>seen
-- (a sorted set scored by the SERVER ms of the delete), so a retried admission of the same
-- id (App(retry_for=): the reply of the first was lost, the job ran and was deleted
-- meanwhile) writes nothing and answers 0 (duplicate), as it would while the row lived.
-- One sorted set per queue, trimmed by age at every ack that adds to it: memory is
-- bounded by SEEN_MS of deletes (a member costs ~70 bytes), and an admission pays one
-- ZSCORE. SEEN_MS covers retry_for's default (10 s) three times over. The native twins
-- (EMQ.ACK, EMQ.ACKMANY, EMQ.ENQUEUE, EMQ.SCHEDULE) hold the same window.
--@include now
local SEEN_MS = 30000
-- seen_recently(p, id): true when id was deleted at its ack less than SEEN_MS ago.
local function seen_recently(p, id)
  local at = redis.call('ZSCORE', p .. 'seen', id)
  return at ~= false and at ~= nil and tonumber(at) > now_ms() - SEEN_MS
end
-- seen_among(p, first, stride): the ids of ARGV (from `first`, one per `stride` values)
-- deleted at their ack less than SEEN_MS ago, as a set: a bulk admission's check, one
-- ZMSCORE per 1000 ids, none at all while the queue has no mark.
local function seen_among(p, first, stride)
  local out, k = {}, p .. 'seen'
  if redis.call('EXISTS', k) == 0 then return out end
  local cut = now_ms() - SEEN_MS
  local ids = {}
  for i = first, #ARGV, stride do ids[#ids + 1] = ARGV[i] end
  for c = 1, #ids, 1000 do
    local part = {unpack(ids, c, math.min(c + 999, #ids))}
    local at = redis.call('ZMSCORE', k, unpack(part))
    for j = 1, #part do
      if at[j] and tonumber(at[j]) > cut then out[part[j]] = true end
    end
  end
  return out
end
-- mark_seen(p, ids, now): the ids deleted at their ack at SERVER ms now join <base>seen;
-- members older than the window leave it.
local function mark_seen(p, ids, now)
  local k = p .. 'seen'
  for c = 1, #ids, 1000 do
    local pairs_ = {}
    for j = c, math.min(c + 999, #ids) do
      pairs_[#pairs_ + 1] = now
      pairs_[#pairs_ + 1] = ids[j]
    end
    redis.call('ZADD', k, unpack(pairs_))
  end
  redis.call('ZREMRANGEBYSCORE', k, '-inf', '(' .. (now - SEEN_MS))
end
