"""What an acknowledged enqueue can lose when its primary dies, with and without WAIT.

Valkey replicates asynchronously: a primary answers a write before its replica has it, so
a write acknowledged in the last instant before a SIGKILL can be missing on the replica that
takes over. With ``App(wait_replicas=1)`` (``durability.confirmed`` with ``Wait(replicas=1)``)
a ``WAIT 1 200`` rides behind each write on the write's own connection and the call returns
once a replica has it, or raises ``NotDurable`` (then it is not counted as acknowledged).
Writes go through the cluster URL, as an app's do.

Each trial forms a fresh loopback cluster (3 primaries with a replica each), writes to one
queue as fast as one client can (single ``jobs.enqueue`` calls, or ``jobs.enqueue_many`` of
100, 1 KB payloads), SIGKILLs the queue's primary mid-stream, waits for the replica's
promotion and counts the acknowledged ids that are not on the promoted replica. Two
conditions: the replica keeps up (on loopback it reads the stream within microseconds), and
the replica stalls (SIGSTOP for the write window, resumed after the kill: a replica behind
on a busy or distant link), which is when asynchronous replication loses acknowledged writes.

    .venv/bin/python bench/failover_loss.py [--trials 3] [--write-s 0.5]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from echomq import Connector
from echomq.core import errors, ids, keyspace
from echomq.core.steps import drive
from echomq.embedded.cluster import LocalCluster
from echomq.verbs import jobs
from echomq.verbs.durability import Wait, confirmed

QUEUE = "loss"
MODES = [("enqueue", False), ("enqueue", True), ("enqueue_many(100)", False),
         ("enqueue_many(100)", True)]


def trial(bulk: bool, wait: bool, write_s: float, stall: bool) -> tuple[int, int]:
    """(acknowledged, lost) for one kill."""
    with LocalCluster(masters=3, replicas=1) as cl:
        owner = cl.owner(keyspace.queue_key(QUEUE, "pending"))
        replica = next(n for n in cl.nodes if n is not owner and int(
            cl.client(n).info("replication").get("master_port", -1)) == owner.port)
        assert replica.pid is not None
        # through the cluster URL, as an app writes; the opt-in WAIT is the product's own
        # (durability.confirmed, as App(wait_replicas=1) does), routed to the queue's primary
        conn = Connector.connect(cl.url)
        patience = Wait(replicas=1, timeout_ms=200)
        acked: list[str] = []
        stop = threading.Event()

        def write() -> None:
            body = b"x" * 1000
            while not stop.is_set():
                batch = [ids.mint() for _ in range(100 if bulk else 1)]
                steps = (jobs.enqueue_many.steps(QUEUE, [(j, body) for j in batch]) if bulk
                         else jobs.enqueue.steps(QUEUE, batch[0], body))
                try:
                    if wait:
                        confirmed(conn, steps, patience)
                    else:
                        drive(conn, steps)
                except errors.NotDurable:
                    continue  # not on a replica in time: not acknowledged as durable
                except errors.EchoMQError:
                    return  # the primary is gone
                acked.extend(batch)

        writer = threading.Thread(target=write)
        if stall:
            os.kill(replica.pid, signal.SIGSTOP)
        writer.start()
        time.sleep(write_s)
        owner.kill()
        stop.set()
        writer.join(10)
        if stall:
            os.kill(replica.pid, signal.SIGCONT)
        cl.wait_ok(timeout=30)
        conn = Connector.connect(cl.url)
        after = Connector.connect(cl.url)
        kept = {m.decode() for m in after.call("ZRANGE", keyspace.queue_key(QUEUE, "pending"),
                                                0, -1)}
        after.close()
        conn.close()
        return len(acked), sum(1 for j in acked if j not in kept)


def main() -> None:
    # a SIGTERM unwinds the with-blocks, so the loopback cluster's nodes are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--write-s", type=float, default=0.5,
                        help="seconds of writing before the SIGKILL")
    args = parser.parse_args()
    print(f"{'replica':<9} {'writes':<18} {'App WAIT':<8} {'trials':>6} {'acked':>8} "
          f"{'lost':>7} {'max lost/kill':>14} {'acked/s':>8}")
    for stall in (False, True):
        for name, wait in MODES:
            results = [trial(name != "enqueue", wait, args.write_s, stall)
                       for _ in range(args.trials)]
            acked = sum(a for a, _ in results)
            lost = [n for _, n in results]
            print(f"{'stalled' if stall else 'in step':<9} {name:<18} "
                  f"{'yes' if wait else 'no':<8} {args.trials:>6} {acked:>8} {sum(lost):>7} "
                  f"{max(lost):>14} {acked / (args.trials * args.write_s):>8.0f}", flush=True)


if __name__ == "__main__":
    main()
