"""Server work per job of the paths an ack's leftovers touch (issues 32, 37): a bulk
admission (``enqueue_many``: the seen mark's check) and a wire-6 drain that deletes rows
(``ack_and_claim`` with a claim id: the seen mark, the claim record), measured as the
server's own time (``INFO commandstats`` usec) per job, which load on the client side
does not inflate. Run it for two trees, alternately, and compare:

    for i in 1 2 3; do PYTHONPATH=../before python bench/ackcost.py before
                       PYTHONPATH=. python bench/ackcost.py after; done

Each tree runs its own module (built in place) and scripts on a fresh embedded server.
"""

from __future__ import annotations

import argparse
import secrets

import valkey

from echomq import Connector
from echomq.core import ids
from echomq.core.payload import encode
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs


def server_usec(r: valkey.Valkey) -> int:
    """The server's time in commands since the last reset (usec)."""
    return sum(int(v["usec"]) for v in r.info("commandstats").values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("label")
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    srv = EmbeddedServer(ephemeral=True).start()
    conn = Connector.connect(srv.url, wire=6)
    r = valkey.Valkey.from_url(srv.url)
    out = []
    try:
        for rnd in range(args.rounds):
            q = f"ackcost{rnd}"
            items = [(ids.mint(), encode("t", [i])) for i in range(args.n)]
            r.config_resetstat()
            for i in range(0, args.n, 1000):
                jobs.enqueue_many(conn, q, items[i:i + 1000])
            admit = server_usec(r)
            r.config_resetstat()
            held = jobs.claim_many(conn, q, 60_000, 50)
            while held:
                try:  # a tree whose ack_and_claim takes a claim id gets one
                    _, held = jobs.ack_and_claim(conn, q, [(h.id, h.token) for h in held],
                                                 60_000, 50, False, secrets.token_hex(8))
                except TypeError:
                    _, held = jobs.ack_and_claim(conn, q, [(h.id, h.token) for h in held],
                                                 60_000, 50, False)
            out.append((round(admit / args.n, 2), round(server_usec(r) / args.n, 2)))
    finally:
        conn.close()
        r.close()
        srv.stop()
    print(args.label, "server us/job (admit, drain) per round:", out)


if __name__ == "__main__":
    main()
