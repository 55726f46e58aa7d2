-- A batch member's end that no worker reports (app.batch: echomq.verbs.batches). A member's
-- payload ends with its batch's mark (..,"batch":"<id>"}, appended at admission); its
-- batch lives on another slot (emq:{b:<id>}:), which no script on the member's queue may
-- write. member_ended(p, jk, id, how): when the row jk is a member, its end ('dead',
-- 'cancelled', 'expired') is recorded on this queue's flow outbox (a stream on the
-- member's own slot, as a flow child's end: includes/flow.lua) as batch, child, how, in
-- the same script that ends it; the carrier that carries flow ends takes it to the batch's
-- slot (@batch_settle), where a member is counted once however often its end arrives (so
-- a worker's own notice of the same end counts once too).
local function member_ended(p, jk, id, how)
  local payload = redis.call('HGET', jk, 'payload')
  if not payload then return end
  local batch = string.match(payload, ',"batch":"([^"\\]+)"}$')
  if batch then
    redis.call('XADD', p .. 'flow:outbox', '*', 'batch', batch, 'child', id, 'how', how)
  end
end
