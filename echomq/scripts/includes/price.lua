-- price(mode, value, now): the schedule score of an 'in'/'at' pair. 'in' is a delay added
-- to the SERVER clock (now, or TIME read here when now is nil); any other mode is an
-- absolute run-at in ms the caller priced on its own clock.
--@include now
local function price(mode, value, now)
  if mode == 'in' then
    return (now or now_ms()) + tonumber(value)
  end
  return tonumber(value)
end
