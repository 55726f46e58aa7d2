-- Times a script writes as a score are bounded, so no reader meets a run-at it cannot show
-- and no job silently never runs: a due (a run-at, a delay, a lease) must be a finite
-- number, and the score it prices within year 9999 (|score| <= 253402300799999 ms, the
-- bound echomq.core.guards and the native module hold). A script checks every due before
-- its first write and refuses the whole call with the text (nothing written):
--   ERR EMQ.<VERB> due must be a finite number
--   ERR EMQ.<VERB> due must be at most 253402300799999 (year 9999)   (the native text)
--   ERR EMQ.<VERB> due must be at least -253402300799999
-- The Python guards refuse the same before any I/O; this is for another client's call.
--@include now
local MAX_TIME_MS = 253402300799999
-- due_refusal(verb, mode, value, now): the refusal for a due ('in' adds it to SERVER now,
-- read here when now is nil; any other mode takes it as the score), or nil when it is fine.
local function due_refusal(verb, mode, value, now)
  local v = tonumber(value)
  if not v or v ~= v or v == math.huge or v == -math.huge then
    return 'ERR EMQ.' .. verb .. ' due must be a finite number'
  end
  if mode == 'in' then v = (now or now_ms()) + v end
  if v > MAX_TIME_MS then
    return 'ERR EMQ.' .. verb .. ' due must be at most 253402300799999 (year 9999)'
  end
  if v < -MAX_TIME_MS then
    return 'ERR EMQ.' .. verb .. ' due must be at least -253402300799999'
  end
  return nil
end
-- dues_refusal(verb, first, stride, at, now): the first refusal among the items of ARGV
-- from `first` in steps of `stride`, each item's mode at offset at and its value at at + 1
-- ('now' items carry no due), or nil.
local function dues_refusal(verb, first, stride, at, now)
  for i = first, #ARGV, stride do
    local mode = ARGV[i + at]
    if mode ~= 'now' then
      local why = due_refusal(verb, mode == 'in' and 'in' or 'at', ARGV[i + at + 1], now)
      if why then return why end
    end
  end
  return nil
end
