-- What an ack that deletes its row keeps beside a kept result (issue 32), so a job kept
-- only for its result still reads its task and runs: <base>kept:<id>, a hash {task, runs,
-- completed_at (SERVER ms)} with the result's PX. The native EMQ.ACK/EMQ.ACKMANY write the
-- same bytes (emq_hot.c: task_of, keep_beside).
--@include now
-- task_of(payload): the task name as the payload spells it (JSON escapes left in), or ''.
-- A plain payload is sorted-key JSON whose top-level "task" follows args, flow and kwargs
-- (and precedes timeout and trace, which hold no such text): the last '"task":"' is the
-- top level's. A codec envelope (MAGIC, a header line, the coded bytes) names it as "t"
-- in its header line, the coded bytes never read.
local function task_of(payload)
  if not payload then return '' end
  if string.sub(payload, 1, 5) == '\0EMQ1' then
    local nl = string.find(payload, '\n', 6, true)
    if not nl then return '' end
    return string.match(string.sub(payload, 6, nl - 1), '.*"t":"([^"]*)"') or ''
  end
  return string.match(payload, '.*"task":"([^"]*)"') or ''
end
-- keep_beside(p, jk, id, runs, keep_ms, now): row jk, about to be deleted, leaves its task
-- and runs (the ack's token) on <base>kept:<id> for keep_ms.
local function keep_beside(p, jk, id, runs, keep_ms, now)
  local k = p .. 'kept:' .. id
  redis.call('HSET', k, 'task', task_of(redis.call('HGET', jk, 'payload')), 'runs', runs,
    'completed_at', now)
  redis.call('PEXPIRE', k, keep_ms)
end
