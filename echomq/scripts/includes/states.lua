-- The job's states and the sorted set each lives on (echomq.core.states.SET_OF; a test
-- checks the two agree). 'linked' is a flow stub: a row on no set.
local STATE_SET = {
  ['scheduled'] = 'schedule',
  ['pending'] = 'pending',
  ['active'] = 'active',
  ['completed'] = 'completed',
  ['dead'] = 'dead',
  ['cancelled'] = 'cancelled',
  ['expired'] = 'expired',
  ['waiting-children'] = 'waiting-children',
  ['waiting'] = 'waiting',
  ['linked'] = false,
}
