-- in_chunks(list, size, fn): call fn(...) with list's items, at most size at a time.
-- Variadic writes (one ZADD for a whole batch) cost one command instead of one per job;
-- chunking keeps unpack under Lua's stack limit for any batch size.
local function in_chunks(list, size, fn)
  for i = 1, #list, size do
    fn(unpack(list, i, math.min(i + size - 1, #list)))
  end
end
