-- A setting a worker start declares (a queue's rate, its cap) beside the operator's: the
-- marker holds what a worker last applied, so a value in force that differs from it is an
-- operator's and stays.
-- declared(current, applied, want, clear, write): {outcome, the value in force}: 'kept'
-- (an operator's), 'none', 'cleared' (clear() ran: the app stopped declaring it), 'same',
-- 'applied' (write() ran). Values are text; '' = none.
local function declared(current, applied, want, clear, write)
  if current ~= applied then return {'kept', current} end
  if want == '' then
    if applied == '' then return {'none', ''} end
    clear()
    return {'cleared', ''}
  end
  if want == current then return {'same', current} end
  write()
  return {'applied', want}
end
