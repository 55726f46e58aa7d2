-- the @survey script: which of a worker's queues need a beat, in one round trip, so a
-- Metronome beats the queues with something leased or due and leaves the idle ones alone.
-- KEYS[1] = a key of the first queue's slot (it routes the call; on a cluster each call
-- surveys the queues of one slot, off a cluster one call surveys them all: the keys read
-- are derived from the bases, as promote derives row keys)
-- ARGV[1] = the horizon in ms, ARGV[2] = '1' when the retention keeps terminal rows (their
-- sets are read), ARGV[3..] = the queue bases
-- Reply: a flat array, three entries per queue that is not quiet: its position (1 for
-- ARGV[3]), a bit mask, and the ms from SERVER now to its next due instant (a run-at or a
-- deadline; -1 for none). Bits: 1 beat it now (a lease to watch, a run-at or deadline
-- within the horizon, a flow to carry or roll back, a group or the queue blocked or paused
-- until an instant, or jobs ready under a queue rate); 2 jobs are ready to claim (pending or
-- a group in the ring: an idle consumer claims); 4 terminal rows to trim. A queue with no
-- bit but a due instant past the horizon is named with mask 0: the Metronome wakes for it.
-- Idle queues cost one EXISTS per CHUNK of them: a queue none of whose watched keys
-- exists is quiet, and an empty set or list does not exist; only a chunk with a key
-- standing is read queue by queue.
--@include now
local horizon = tonumber(ARGV[1])
local trims = ARGV[2] == '1'
local CHUNK = 40
local WATCHED = {'schedule', 'deadlines', 'active', 'flow:outbox', 'flows:open', 'gwait',
                 'blocked_until', 'paused', 'pending', 'ring'}
local ENDED = {'completed', 'dead', 'cancelled', 'expired'}
local now = nil
local out = {}

-- head(key): ms from now to the first score of a zset, or nil when it is empty
local function head(key)
  local h = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if h[2] then return tonumber(h[2]) - now end
  return nil
end

local function keys_of(first, last, names, into)
  for i = first, last do
    for _, name in ipairs(names) do into[#into + 1] = ARGV[i] .. name end
  end
  return into
end

local function one(i)
  local p = ARGV[i]
  local mask = 0
  now = now or now_ms()
  local due = head(p .. 'schedule')
  local deadline = head(p .. 'deadlines')
  if deadline and (not due or deadline < due) then due = deadline end
  if due and due <= horizon then mask = 1 end
  if mask == 0 and (redis.call('ZCARD', p .. 'active') > 0
      or redis.call('XLEN', p .. 'flow:outbox') > 0
      or redis.call('EXISTS', p .. 'flows:open', p .. 'gwait', p .. 'blocked_until') > 0
      or redis.call('PTTL', p .. 'paused') > 0) then
    mask = 1
  end
  if redis.call('EXISTS', p .. 'pending', p .. 'ring') > 0 then
    mask = mask + 2
    if mask == 2 and redis.call('EXISTS', p .. 'rate') == 1 then mask = 3 end
  end
  return mask, due
end

for first = 3, #ARGV, CHUNK do
  local last = math.min(first + CHUNK - 1, #ARGV)
  local standing = redis.call('EXISTS', unpack(keys_of(first, last, WATCHED, {}))) > 0
  local ended = trims and redis.call('EXISTS', unpack(keys_of(first, last, ENDED, {}))) > 0
  if standing or ended then
    for i = first, last do
      local mask, due = 0, nil
      if standing and redis.call('EXISTS', unpack(keys_of(i, i, WATCHED, {}))) > 0 then
        mask, due = one(i)
      end
      if ended and redis.call('EXISTS', unpack(keys_of(i, i, ENDED, {}))) > 0 then
        mask = mask + 4
      end
      if mask > 0 or due then
        out[#out + 1] = i - 2
        out[#out + 1] = mask
        out[#out + 1] = due and math.max(0, due) or -1
      end
    end
  end
end
return out
