"""The "raw" baseline: the fewest writes a Valkey job queue can do, with plain valkey-py.

Per job: ``HSET`` row + ``ZADD`` pending (or schedule), pipelined (in bulk, one ``ZADD``
carries the chunk's members). The worker claims with
one small Lua call (``ZPOPMIN`` k, ``ZADD`` active, ``HGET`` payload), acks with one
pipeline (``ZREM`` active + ``DEL`` rows for the whole batch) and releases due jobs with a
Lua batch of ``ZRANGEBYSCORE`` + ``ZREM`` + ``ZADD`` + ``HSET``. No id branding, no token,
no wake list, no guards: it is the practical limit, not a queue anyone should run.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import valkey.asyncio as avalkey
from _common import CHUNK, PAYLOAD, RECORD, SCHEDULE_AHEAD_S, chunks, parse, ready, report

BEAT_S = 0.1
LEASE_MS = 30_000

CLAIM = """
local out = {}
local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[2]))
for i = 1, #popped, 2 do
  local id = popped[i]
  redis.call('ZADD', KEYS[2], tonumber(ARGV[3]), id)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', ARGV[1] .. id, 'payload')
end
return out
"""

RELEASE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[2], 0, id)
  redis.call('HSET', ARGV[1] .. id, 'state', 'pending')
end
return #due
"""


class Keys:
    def __init__(self, queue: str) -> None:
        base = f"raw:{{{queue}}}:"
        self.row = base + "job:"
        self.pending = base + "pending"
        self.schedule = base + "schedule"
        self.active = base + "active"


def _ids(n: int) -> list[str]:
    prefix = os.urandom(6).hex()
    return [f"{prefix}{i:08d}" for i in range(n)]


async def produce(args: Any) -> None:
    client = avalkey.Valkey.from_url(args.url)
    k = Keys(args.queue)
    n = args.n
    ids = _ids(n)
    scheduled = args.scenario.startswith("schedule") or args.scenario == "load-at"
    target = k.schedule if scheduled else k.pending

    def score() -> float:
        if args.scenario == "load-at":
            return round(args.due * 1000)
        if scheduled:
            return int(time.time() * 1000) + SCHEDULE_AHEAD_S * 1000
        return 0

    fields = ("state", "x", "payload", PAYLOAD)

    t0 = time.perf_counter()
    if args.scenario in ("enqueue-one", "schedule-one"):
        for jid in ids:
            pipe = client.pipeline(transaction=False)
            pipe.execute_command("HSET", k.row + jid, *fields)
            pipe.execute_command("ZADD", target, score(), jid)
            await pipe.execute()
    else:
        # the cheapest client side valkey-py offers: bare commands, one ZADD per chunk
        for part in chunks(n, CHUNK):
            pipe = client.pipeline(transaction=False)
            members: list[Any] = []
            for i in part:
                pipe.execute_command("HSET", k.row + ids[i], *fields)
                members += (score(), ids[i])
            pipe.execute_command("ZADD", target, *members)
            await pipe.execute()
    elapsed = time.perf_counter() - t0
    await client.aclose()
    report(seconds=elapsed, n=n)


async def work(args: Any) -> None:
    RECORD.arm(args.n, args.out)
    client = avalkey.Valkey.from_url(args.url)
    k = Keys(args.queue)
    claim = client.register_script(CLAIM)
    release = client.register_script(RELEASE)
    want = args.concurrency
    ready()
    next_beat = 0.0
    while True:
        now = time.monotonic()
        if now >= next_beat:
            next_beat = now + BEAT_S
            await release(keys=[k.schedule, k.pending], args=[k.row, int(time.time() * 1000), 1000])
        expires = int(time.time() * 1000) + LEASE_MS
        got = await claim(keys=[k.pending, k.active], args=[k.row, want, expires])
        if got:
            ids = got[0::2]
            for _payload in got[1::2]:
                RECORD()
            pipe = client.pipeline(transaction=False)
            pipe.zrem(k.active, *ids)
            pipe.delete(*[k.row + i.decode() for i in ids])
            await pipe.execute()
            continue
        wait = max(0.0, next_beat - time.monotonic())
        head = await client.zrange(k.schedule, 0, 0, withscores=True)
        if head:
            wait = min(wait, max(0.0, head[0][1] / 1000.0 - time.time()))
        if wait > 0:
            await asyncio.sleep(wait)
        next_beat = 0.0  # the wait ended at the beat or at the earliest run-at


def main() -> None:
    args = parse()
    asyncio.run(produce(args) if args.role == "produce" else work(args))


if __name__ == "__main__":
    main()
