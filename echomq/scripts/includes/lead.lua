-- lead(p, score): call BEFORE putting a run-at of score on <p>schedule. A beat loop plans
-- its next wake at the earliest run-at it last read (jobs.next_due_ms), so a run-at ahead
-- of the schedule's head would wait for the loop's next beat; when score is below the head
-- (or the schedule is empty), one token is left on <p>due, which an idle consumer pops
-- beside its wake list to re-read the head and re-plan the wake. At most one token is
-- kept (as wake()'s); a tie with the head needs none: the loop already wakes then.
--@include wake
local function lead(p, score)
  local head = redis.call('ZRANGE', p .. 'schedule', 0, 0, 'WITHSCORES')
  if head[2] == nil or score < tonumber(head[2]) then
    wake(p .. 'due')
  end
end
-- lead_many(p, list): lead() for the earliest score of a {score, id, score, id, ...} list
-- (admit()'s batch for the schedule set), before its ZADD.
local function lead_many(p, list)
  local low
  for i = 1, #list, 2 do
    if low == nil or list[i] < low then low = list[i] end
  end
  if low ~= nil then lead(p, low) end
end
-- lead_deadline(p, till): call BEFORE putting a deadline of till on <p>deadlines (a durable
-- wait's timeout): the legs also wake at the earliest deadline (jobs.next_due), so one
-- ahead of both heads (the deadlines' and the schedule's) leaves the same token as lead().
local function lead_deadline(p, till)
  local head = redis.call('ZRANGE', p .. 'deadlines', 0, 0, 'WITHSCORES')
  if head[2] == nil or till < tonumber(head[2]) then lead(p, till) end
end
