-- the @trim script: retention for a terminal set (completed, dead, cancelled or expired),
-- bounded per call.
-- KEYS[1] = the set (emq:{q}:completed, :dead, :cancelled or :expired), ids scored by the SERVER ms they
-- reached it
-- ARGV[1] = the queue base, ARGV[2] = keep at most this many (-1: no count limit),
-- ARGV[3] = keep for at most this many ms (-1: no age limit), ARGV[4] = the batch,
-- ARGV[5] = the state a row must still carry to be deleted (the set's own name)
-- Reply: how many members were trimmed (at most the batch). Oldest first: the count limit
-- drops the lowest scores beyond it, the age limit drops scores at or before SERVER now -
-- age. A member whose row moved on (revived, re-run) loses only its set membership.
--@include now
local p = ARGV[1]
local keep = tonumber(ARGV[2])
local age = tonumber(ARGV[3])
local budget = tonumber(ARGV[4])
local done = 0
local function drop(ids)
  for _, id in ipairs(ids) do
    redis.call('ZREM', KEYS[1], id)
    local jk = p .. 'job:' .. id
    if redis.call('HGET', jk, 'state') == ARGV[5] then
      redis.call('DEL', jk)
    end
    done = done + 1
  end
end
if keep >= 0 then
  local over = redis.call('ZCARD', KEYS[1]) - keep
  if over > 0 then
    drop(redis.call('ZRANGE', KEYS[1], 0, math.min(over, budget) - 1))
  end
end
if age >= 0 and done < budget then
  drop(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms() - age, 'LIMIT', 0, budget - done))
end
return done
