-- The bulk admissions' shared parts (@enqueue_many, @schedule_many, @admit_many): the
-- checks every call makes before its first write, and the plain per-job admission.
--@include kind
--@include row
--@include now
--@include bound
--@include seen
-- checked_dues(stride): every id of ARGV (from 2, one job per `stride` values) is
-- JOB-namespaced and every due (its mode at offset 2) is bounded; SERVER now (ms, read
-- once, after the ids) and nil, or nil and the refusal text for the whole call.
local function checked_dues(stride)
  if not all_jobs(2, stride) then
    return nil, KIND_ERROR
  end
  local now = now_ms()
  return now, dues_refusal('SCHEDULE', 2, stride, 2, now)
end
-- new_rows(p, stride, state, due): each job of ARGV (from 2, one per `stride` values:
-- id, payload, ...) gets its row in `state` (new_row) unless it was deleted at its ack
-- moments ago (seen_among); `due(i)` is the score of the job
-- at ARGV[i]. Returns the reply (1 admitted, 0 duplicate, per job), the ZADD members
-- (score, id, ...) of the admitted and their count times 2.
local function new_rows(p, stride, state, due)
  local rows = p .. 'job:'
  local out, members, n = {}, {}, 0
  local recent = seen_among(p, 2, stride)
  for i = 2, #ARGV, stride do
    local id = ARGV[i]
    if not recent[id] and new_row(rows .. id, state, ARGV[i + 1]) then
      out[#out + 1] = 1
      members[n + 1], members[n + 2] = due(i), id
      n = n + 2
    else
      out[#out + 1] = 0
    end
  end
  return out, members, n
end
