-- the @ack_many script: token-fenced completion of many jobs in hand, in one call.
-- KEYS[1] = active, KEYS[2] = the completed set
-- ARGV[1] = the queue base (rows derive from it), ARGV[2] = '1' keep rows / '0' delete,
-- ARGV[3..] = id1, token1, id2, token2, ...; or with ARGV[2] = '1r' / '0r' (results),
-- ARGV[3..] = id1, token1, result1, keep ms1, ... (a '' keep ms: no result kept; a kept
-- result goes to <base>result:<id> with PX, as @ack)
-- Reply: an array with one entry per job: 1 completed, or the refusal @ack would give
-- ('EMQKIND ...', 'EMQSTALE job gone', 'EMQSTALE ack token mismatch',
-- 'EMQSTATE ack not active') as a string; a refused job is left exactly as it was.
-- Kept rows are written state = completed, completed_at = SERVER ms, and indexed on the
-- completed set; deleted rows go in one DEL, their ids join <base>seen and a kept
-- result's row leaves its task and runs on <base>kept:<id> (as @ack). Counted on
-- emq:{q}:stats (completed).
--@include fence
--@include ended
--@include ring
--@include chunks
--@include kept
--@include seen
local p = ARGV[1]
local out, fenced, slot, seen, dups = {}, {}, {}, {}, {}
local keep = string.sub(ARGV[2], 1, 1)
local stride = string.sub(ARGV[2], 2, 2) == 'r' and 4 or 2
local results = {}
for i = 3, #ARGV, stride do
  local id = ARGV[i]
  local k = #out + 1
  if not is_job(id) then
    out[k] = KIND_ERROR
  elseif seen[id] then
    out[k] = 0
    dups[#dups + 1] = {k, seen[id]}
  else
    seen[id] = k
    local refused = fence(p .. 'job:' .. id, id, ARGV[i + 1], 'ack', nil)
    if refused then
      out[k] = refused
    else
      out[k] = 0
      fenced[#fenced + 1] = id
      slot[#fenced] = k
      if stride == 4 and ARGV[i + 3] ~= '' then results[id] = i + 2 end
    end
  end
end
local live, rows, done = {}, {}, {}
for c = 1, #fenced, 1000 do
  local part = {unpack(fenced, c, math.min(c + 999, #fenced))}
  local scores = redis.call('ZMSCORE', KEYS[1], unpack(part))
  for j, id in ipairs(part) do
    if scores[j] then
      live[#live + 1] = id
      rows[#rows + 1] = p .. 'job:' .. id
      out[slot[c + j - 1]] = 1
    else
      out[slot[c + j - 1]] = 'EMQSTATE ack not active'
    end
  end
end
if #live > 0 then
  in_chunks(live, 1000, function(...) redis.call('ZREM', KEYS[1], ...) end)
  for j, id in ipairs(live) do
    local r = results[id]
    if r then redis.call('SET', p .. 'result:' .. id, ARGV[r], 'PX', tonumber(ARGV[r + 1])) end
    left_active(p, rows[j])
    ended(p, rows[j], id, 'completed')
  end
  if keep == '1' then
    local now = now_ms()
    for _, id in ipairs(live) do
      redis.call('HSET', p .. 'job:' .. id, 'state', 'completed', 'completed_at', now)
      redis.call('HDEL', p .. 'job:' .. id, 'cancel')
      done[#done + 1] = now
      done[#done + 1] = id
    end
    in_chunks(done, 2000, function(...) redis.call('ZADD', KEYS[2], ...) end)
  else
    local now = now_ms()
    for j, id in ipairs(live) do
      local r = results[id]
      if r then keep_beside(p, rows[j], id, ARGV[r - 1], tonumber(ARGV[r + 1]), now) end
    end
    in_chunks(rows, 1000, function(...) redis.call('DEL', ...) end)
    mark_seen(p, live, now)
  end
end
-- an id repeated in one call answers what a second @ack after the first would
local again = keep == '1' and 'EMQSTATE ack not active' or 'EMQSTALE job gone'
for _, d in ipairs(dups) do
  if out[d[2]] == 1 then out[d[1]] = again else out[d[1]] = out[d[2]] end
end
return out
