"""``echomq cluster up|down|status``: a Valkey Cluster on loopback for development.

``up`` starts ``--masters`` primaries with ``--replicas`` replicas each from the embedded
binary (the EMQ module loaded on every node), waits for ``cluster_state:ok`` on every node,
prints the cluster URL (``valkey+cluster://...``) as its last line, records the nodes' pids
in ``<dir>/cluster.json`` and exits, leaving the nodes running. ``down`` stops them by those
pids. The test fixtures form their clusters with the same ``echomq.embedded.cluster.LocalCluster``.
"""

from __future__ import annotations

import argparse
import pathlib
import secrets
import shutil
import sys
from typing import Any


def _default_dir() -> pathlib.Path:
    from echomq.embedded.launch import default_data_dir

    return default_data_dir() / "cluster"


def register(sub: Any) -> None:
    p = sub.add_parser("cluster", help="a local Valkey Cluster for development (up / down)")
    verbs = p.add_subparsers(dest="cluster_command", metavar="up|down|status", required=True)
    up = verbs.add_parser("up", help="start a loopback cluster and print its URL")
    up.add_argument("--masters", type=int, default=3, help="primaries (default 3)")
    up.add_argument("--replicas", type=int, default=1, help="replicas per primary (default 1)")
    up.add_argument("--password", default=None,
                    help="password for every node (default: generated; '' for none)")
    up.add_argument("--no-native", action="store_true", help="do not load the EMQ module")
    up.add_argument("--node-timeout-ms", type=int, default=1000,
                    help="cluster-node-timeout: how soon a dead primary is failed over")
    up.add_argument("--timeout", type=float, default=60.0,
                    help="seconds to wait for cluster_state:ok (default 60)")
    _dir(up)
    up.set_defaults(func=run_up)
    down = verbs.add_parser("down", help="stop the cluster `up` started (by pid)")
    _dir(down)
    down.set_defaults(func=run_down)
    status = verbs.add_parser("status", help="print the running cluster's URL")
    _dir(status)
    status.set_defaults(func=run_status)


def _dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", default=None,
                   help="where the nodes' data and cluster.json live "
                        "(default: <data dir>/cluster)")


def run_up(args: argparse.Namespace) -> int:
    from echomq.embedded.cluster import LocalCluster, read_state
    from echomq.embedded.launch import ServerError

    if args.masters < 1 or args.replicas < 0:
        print("echomq: a cluster needs --masters >= 1 and --replicas >= 0", file=sys.stderr)
        return 2
    where = pathlib.Path(args.dir) if args.dir else _default_dir()
    state = read_state(where)
    if state is not None and _alive(state):
        print(f"echomq: a cluster is already up in {where} (echomq cluster down --dir "
              f"{where} first)", file=sys.stderr)
        print(state["url"])
        return 1
    # a stale cluster's nodes.conf would make fresh nodes try to rejoin it: clear only
    # what a previous `up` made here
    for old in where.glob("node[0-9]*"):
        shutil.rmtree(old, ignore_errors=True)
    password = secrets.token_urlsafe(18) if args.password is None else args.password
    total = args.masters * (1 + args.replicas)
    print(f"starting {total} nodes ({args.masters} primaries, {args.replicas} replica(s) "
          f"each) in {where} ...", file=sys.stderr, flush=True)
    cl = LocalCluster(masters=args.masters, replicas=args.replicas, native=not args.no_native,
                      node_timeout_ms=args.node_timeout_ms, password=password, data_dir=where)
    try:
        cl.start(timeout=args.timeout)
    except ServerError as exc:
        print(f"echomq: the cluster did not form: {exc}", file=sys.stderr)
        return 1
    url = cl.url
    pids = [n.pid for n in cl.nodes]
    path = cl.detach(where)
    print(f"cluster_state:ok; pids {' '.join(map(str, pids))}; state {path}", file=sys.stderr)
    print(url, flush=True)
    return 0


def _alive(state: dict[str, Any]) -> bool:
    from echomq.embedded.cluster import node_alive

    return any(node_alive(int(n["pid"])) for n in state.get("nodes", []) if n.get("pid"))


def run_down(args: argparse.Namespace) -> int:
    from echomq.embedded.cluster import read_state, stop_detached

    where = pathlib.Path(args.dir) if args.dir else _default_dir()
    if read_state(where) is None:
        print(f"echomq: no cluster recorded in {where}", file=sys.stderr)
        return 1
    stopped = stop_detached(where)
    print(f"stopped {stopped} node(s)")
    return 0


def run_status(args: argparse.Namespace) -> int:
    from echomq.embedded.cluster import read_state

    where = pathlib.Path(args.dir) if args.dir else _default_dir()
    state = read_state(where)
    if state is None or not _alive(state):
        print(f"echomq: no cluster running in {where}", file=sys.stderr)
        return 1
    print(state["url"])
    return 0
