-- the @rendezvous script: a waiter's half of a signal's rendezvous, in the signal key's
-- own slot (emq:{sig:<key>}), run before its job parks (@wait).
-- KEYS[1] = the queues with waiters on the key (emq:{sig:<key>}:queues), KEYS[2] = the
-- stored signal (emq:{sig:<key>}:value)
-- ARGV[1] = the waiter's queue name
-- Reply: the stored signal's payload (a signal was sent within its TTL: the waiter takes
-- it, @wait 'take', and does not park), or nil. The queue is added to KEYS[1] scored by
-- SERVER now (a later registration moves it later).
-- A signal's sender stores before it reads KEYS[1] (@signal), and this script registers
-- before it reads KEYS[2]: both run in this one slot, one after the other, so either the
-- sender sees this queue or this waiter sees the stored signal. (A sender that resumes
-- the queue before the job parks leaves the queue a copy of the payload, which the park
-- takes: @resume, @wait.)
--@include now
redis.call('ZADD', KEYS[1], now_ms(), ARGV[1])
return redis.call('GET', KEYS[2])
