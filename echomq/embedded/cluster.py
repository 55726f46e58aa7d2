"""A Valkey Cluster on loopback from the embedded binary (for tests, demos, local work).

Every key of a queue shares one hash tag, so each transition runs on the one node that owns
the queue's slot; the connectors route by the keys each step declares (``cluster=True`` in
``Connector.connect``). ``LocalCluster`` forms a cluster the way the notes recommend:
explicit bus ports (ephemeral ports are often above 55535, where ``port+10000`` overflows),
``CLUSTER MEET`` with the bus port, slots split evenly, replicas attached, then wait for
``cluster_state:ok`` everywhere and for replicas' links.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import time
from collections.abc import Sequence
from typing import Any

import valkey

from echomq.connectors import urls
from echomq.embedded.launch import ServerError, free_port
from echomq.embedded.server import EmbeddedServer

SLOTS = 16384
STATE_FILE = "cluster.json"


class LocalCluster:
    """``masters`` primaries (+ ``replicas`` per primary), each an ``EmbeddedServer``."""

    def __init__(
        self,
        masters: int = 3,
        replicas: int = 0,
        *,
        native: bool = True,
        node_timeout_ms: int = 1000,
        password: str = "",
        data_dir: str | os.PathLike[str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        if masters < 1 or replicas < 0:
            raise ValueError("a cluster needs at least one master")
        self.masters = masters
        self.replicas = replicas
        self.native = native
        self.node_timeout_ms = node_timeout_ms
        self.password = password
        self.data_dir = pathlib.Path(data_dir) if data_dir is not None else None
        self.extra_args = list(extra_args)
        self.nodes: list[EmbeddedServer] = []

    @property
    def url(self) -> str:
        """The cluster URL, ``valkey+cluster://[:password@]h:p,h:p,...`` naming every node
        (any one that answers is enough; the client discovers the rest)."""
        if not self.nodes:
            raise ServerError("the cluster is not started")
        return urls.cluster_url([(n.host, int(n.port or 0)) for n in self.nodes],
                                password=self.password or None)

    def start(self, timeout: float = 30.0) -> LocalCluster:
        """Start the nodes, form the cluster and wait (up to ``timeout`` s, HOST monotonic)
        until it reports ``cluster_state:ok``; returns ``self``."""
        total = self.masters * (1 + self.replicas)
        auth = ["--masterauth", self.password] if self.password else []
        try:
            for i in range(total):
                bus = free_port()
                node = EmbeddedServer(
                    ephemeral=True,
                    data_dir=(self.data_dir / f"node{i}") if self.data_dir else None,
                    password=self.password,
                    native=self.native,
                    extra_args=[
                        "--cluster-enabled", "yes",
                        "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", str(self.node_timeout_ms),
                        "--cluster-port", str(bus),
                        # a queue lives in one slot: a primary that fails over must not make
                        # the healthy ones refuse their own slots (CLUSTERDOWN) meanwhile
                        "--cluster-require-full-coverage", "no",
                        "--repl-diskless-sync-delay", "0",
                        *auth,
                        *self.extra_args,
                    ],
                )
                node.bus_port = bus  # type: ignore[attr-defined]
                self.nodes.append(node.start())
            self._form(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def client(self, node: EmbeddedServer) -> Any:
        """A plain client on one node (str replies)."""
        return valkey.Valkey(host=node.host, port=node.port, password=self.password or None,
                             decode_responses=True)

    def primaries(self) -> list[EmbeddedServer]:
        """The live nodes that are primaries now (a failover changes the set)."""
        out = []
        for node in self.nodes:
            if node.running():
                with contextlib.suppress(valkey.exceptions.ValkeyError):
                    if self.client(node).info("replication").get("role") == "master":
                        out.append(node)
        return out

    def _form(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        primaries = self.nodes[: self.masters]
        per = SLOTS // self.masters
        for i, node in enumerate(primaries):
            hi = SLOTS - 1 if i == self.masters - 1 else (i + 1) * per - 1
            self.client(node).execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, hi)
        first = self.client(self.nodes[0])
        for node in self.nodes[1:]:
            first.execute_command("CLUSTER", "MEET", node.host, node.port, node.bus_port)  # type: ignore[attr-defined]
        self._wait(deadline, "every node to know every other", self._all_known)
        ids = [self.client(n).execute_command("CLUSTER", "MYID") for n in primaries]
        for j, node in enumerate(self.nodes[self.masters:]):
            self.client(node).execute_command("CLUSTER", "REPLICATE", ids[j % self.masters])
        self._wait(deadline, "cluster_state:ok", self._all_ok)

    def _all_known(self) -> bool:
        for node in self.nodes:
            text = self.client(node).execute_command("CLUSTER", "NODES")
            lines = [ln for ln in str(text).splitlines() if ln.strip()]
            if len(lines) != len(self.nodes) or "handshake" in text:
                return False
        return True

    def _all_ok(self) -> bool:
        for node in self.nodes:
            if not node.running():
                continue
            c = self.client(node)
            if c.cluster("info").get("cluster_state") != "ok":
                return False
            info = c.info("replication")
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def _wait(self, deadline: float, what: str, check: Any) -> None:
        while True:
            with contextlib.suppress(valkey.exceptions.ValkeyError):
                if check():
                    return
            if time.monotonic() > deadline:
                raise ServerError(f"cluster did not reach {what} in time")
            time.sleep(0.05)

    def wait_ok(self, timeout: float = 15.0) -> None:
        """Wait until every live node reports ``cluster_state:ok`` (after a failover)."""
        self._wait(time.monotonic() + timeout, "cluster_state:ok", self._all_ok)

    def owner(self, key: str) -> EmbeddedServer:
        """The live primary that serves ``key``'s slot."""
        for node in self.nodes:
            if not node.running():
                continue
            c = self.client(node)
            if c.info("replication").get("role") != "master":
                continue
            slot = c.execute_command("CLUSTER", "KEYSLOT", key)
            for lo, hi, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if lo <= slot <= hi and _ and _[0][1] == node.port:
                    return node
        raise ServerError(f"no live primary owns {key!r}")

    def stop(self) -> None:
        """Stop every node this object started."""
        for node in self.nodes:
            node.stop()
        self.nodes = []

    # -- a cluster that outlives this process (``echomq cluster up`` / ``down``) ----------

    def state(self) -> dict[str, Any]:
        """What ``down`` needs: the URL and every node's pid, port and data dir."""
        return {
            "url": self.url, "masters": self.masters, "replicas": self.replicas,
            "nodes": [{"pid": n.pid, "port": n.port, "dir": str(n.data_dir)}
                      for n in self.nodes],
        }

    def detach(self, state_dir: str | os.PathLike[str]) -> pathlib.Path:
        """Write the state file under ``state_dir`` and let the nodes outlive this object
        (they run in their own sessions); ``stop_detached`` stops them by pid."""
        path = pathlib.Path(state_dir) / STATE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        # the URL carries the password: the state file is for its owner only
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(self.state(), indent=2))
        tmp.replace(path)
        for node in self.nodes:
            node.process = None  # no stop at garbage collection: the state file owns them
        self.nodes = []
        return path

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def read_state(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The state ``detach`` wrote under ``state_dir``, or ``None``."""
    try:
        data = json.loads((pathlib.Path(state_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def node_alive(pid: int) -> bool:
    """``pid`` is alive and is a valkey-server (a recycled pid is left alone)."""
    try:
        cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc: trust the state file
    return b"valkey-server" in cmdline or b"redis-server" in cmdline


def stop_detached(state_dir: str | os.PathLike[str], timeout: float = 10.0) -> int:
    """Stop the nodes a detached cluster recorded under ``state_dir`` by pid (SIGTERM,
    then SIGKILL after ``timeout``), remove the state file; how many were running."""
    state = read_state(state_dir)
    if state is None:
        return 0
    pids = [int(n["pid"]) for n in state.get("nodes", []) if n.get("pid")]
    live = [p for p in pids if node_alive(p)]
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(node_alive(p) for p in live) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in live:
        if node_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    (pathlib.Path(state_dir) / STATE_FILE).unlink(missing_ok=True)
    return len(live)
