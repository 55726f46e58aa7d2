-- the @admit_many script: admit many jobs, each with its own mode and options, in one call.
-- KEYS[1] = pending, KEYS[2] = the schedule set
-- ARGV[1] = the queue base (rows, lanes and the wake list derive from it),
-- ARGV[2..] = per job 9 values: id, payload, mode ('now', 'in' or 'at'), value (the delay
-- or run-at ms; ignored for 'now'), then the option tail: priority, group, unique key,
-- unique_for ms, notify ms ('' = none; see includes/admit.lua)
-- Reply: an array with one entry per job, 1 admitted, 0 duplicate (row exists) or the
-- owner's id (a live job owns the unique key; an earlier job of the same call may).
-- Every id is checked before the first write (one foreign id refuses the whole call with
-- EMQKIND, nothing written), and every due (includes/bound.lua: one that is not a finite
-- number or prices a score past year 9999 refuses the call, nothing written). Each admission is @enqueue's or @schedule's; 'in' prices on
-- the SERVER clock, read once per call.
-- An item without options (its tail all '') takes the plain admission (one new_row, its
-- id batched like admit()'s), skipping admit()'s option machinery: the same writes.
--@include many
--@include admit
--@include chunks
local p = ARGV[1]
local now, refused = checked_dues(9)
if refused then return redis.error_reply(refused) end
local out, batch = {}, {}
local recent = seen_among(p, 2, 9)
local pending, schedule = {}, {}
batch[KEYS[1]], batch[KEYS[2]] = pending, schedule
for i = 2, #ARGV, 9 do
  local mode = ARGV[i + 2]
  if mode ~= 'now' and mode ~= 'in' then mode = 'at' end
  if ARGV[i + 4] == '' and ARGV[i + 5] == '' and ARGV[i + 6] == '' and ARGV[i + 7] == ''
      and ARGV[i + 8] == '' then
    local id = ARGV[i]
    if not recent[id] and
        new_row(p .. 'job:' .. id, mode == 'now' and 'pending' or 'scheduled', ARGV[i + 1]) then
      local list = mode == 'now' and pending or schedule
      list[#list + 1] = mode == 'now' and 0 or price(mode, ARGV[i + 3], now)
      list[#list + 1] = id
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  else
    local opts = admit_opts(i + 4)
    opts.now, opts.batch = now, batch
    out[#out + 1] = admit(p, ARGV[i], ARGV[i + 1], mode, ARGV[i + 3], opts)
  end
end
if #pending == 0 then batch[KEYS[1]] = nil end
if #schedule == 0 then batch[KEYS[2]] = nil end
flush(p, batch)
return out
