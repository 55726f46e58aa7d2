"""A private CA and a TLS server for the TLS tests: certificates made with the ``openssl``
binary (no Python dependency), served by Debian's ``redis-server`` (built with TLS; the
embedded Valkey binary has none). Both are looked up on PATH; ``missing()`` says why a
test must skip."""

from __future__ import annotations

import pathlib
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.support.polling import wait_for

REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
OPENSSL = shutil.which("openssl")


def missing() -> str | None:
    """Why the TLS tests cannot run here (``None``: they can)."""
    if OPENSSL is None:
        return "no openssl binary"
    if not pathlib.Path(REDIS).exists():
        return "no redis-server (Debian's package has TLS; .ci/run installs it)"
    return None


@dataclass(frozen=True)
class PKI:
    """File paths: the CA, the server's pair (for 127.0.0.1 and localhost), a client pair
    the CA signed, and a second CA that signed nothing here (the wrong one)."""

    ca: pathlib.Path
    server_cert: pathlib.Path
    server_key: pathlib.Path
    client_cert: pathlib.Path
    client_key: pathlib.Path
    other_ca: pathlib.Path


def _ssl(*args: str, cwd: pathlib.Path) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True)


def make_pki(root: pathlib.Path) -> PKI:
    """A CA, a server and a client certificate signed by it, and another CA (EC keys:
    quick to make)."""
    root.mkdir(parents=True, exist_ok=True)
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for ca in ("ca", "other-ca"):
        _ssl("req", "-x509", *key, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
             "-subj", f"/CN=echomq test {ca}", cwd=root)
    (root / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    (root / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for who in ("server", "client"):
        _ssl("req", *key, "-keyout", f"{who}.key", "-out", f"{who}.csr",
             "-subj", f"/CN=echomq test {who}", cwd=root)
        _ssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{who}.pem", "-days", "2", "-extfile", f"{who}.ext",
             cwd=root)
    return PKI(root / "ca.pem", root / "server.pem", root / "server.key", root / "client.pem",
               root / "client.key", root / "other-ca.pem")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


@contextmanager
def tls_server(pki: PKI, workdir: pathlib.Path, *, mutual: bool) -> Iterator[int]:
    """A redis-server on loopback speaking TLS only (``mutual``: clients must present a
    certificate the CA signed); its TLS port."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [REDIS, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", str(pki.server_cert), "--tls-key-file", str(pki.server_key),
         "--tls-ca-cert-file", str(pki.ca), "--tls-auth-clients", "yes" if mutual else "no",
         "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: proc.poll() is not None or _accepts(port), 10, "the TLS port open")
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _client(port: int, pki: PKI) -> Any:
    import valkey

    return valkey.Valkey(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(pki.ca),
                         ssl_check_hostname=False, socket_timeout=5)


@contextmanager
def tls_cluster(pki: PKI, workdir: pathlib.Path, masters: int = 3) -> Iterator[list[int]]:
    """``masters`` redis-server primaries forming a Cluster over TLS (clients, and the
    cluster bus: ``tls-cluster yes``); their TLS ports. Slots split evenly."""
    ports = [free_port() for _ in range(masters)]
    buses = [free_port() for _ in range(masters)]
    procs = []
    try:
        for i, (port, bus) in enumerate(zip(ports, buses, strict=True)):
            d = workdir / f"node{i}"
            d.mkdir(parents=True, exist_ok=True)
            procs.append(subprocess.Popen(
                [REDIS, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                 "--tls-cert-file", str(pki.server_cert), "--tls-key-file", str(pki.server_key),
                 "--tls-ca-cert-file", str(pki.ca), "--tls-auth-clients", "no",
                 "--tls-cluster", "yes", "--tls-replication", "yes",
                 "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                 "--cluster-node-timeout", "1000", "--cluster-port", str(bus),
                 "--save", "", "--appendonly", "no", "--dir", str(d)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port in ports:
            wait_for(lambda p=port: _accepts(p), 10, f"node {port} up")
        clients = [_client(p, pki) for p in ports]
        step = 16384 // masters
        for i, c in enumerate(clients):
            last = 16383 if i == masters - 1 else (i + 1) * step - 1
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * step, last)
        for port, bus in zip(ports[1:], buses[1:], strict=True):
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port, bus)

        def ok() -> bool:
            return all(b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO")
                       for c in clients)

        wait_for(ok, 30, "the TLS cluster formed", every=0.1)
        for c in clients:
            c.close()
        yield ports
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
