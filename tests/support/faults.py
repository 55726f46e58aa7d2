"""A TCP fault proxy between a client and Valkey, stdlib only: the fault drill in a test.

``FaultProxy(host, port)`` listens on a loopback port and pipes every connection to the
server. While it runs, a test switches what the network does:

- ``blackhole()``: bytes both ways are swallowed (the connections stay open, new ones are
  accepted and swallowed too): a cable cut, seen as socket timeouts;
- ``drop_replies()``: the client's commands reach the server, its replies are swallowed:
  every call is applied and times out, the ambiguous case;
- ``stall()``: nothing is read either way (bytes wait in the kernel's buffers), as a
  SIGSTOPped server;
- ``latency(s)``: every chunk waits ``s`` seconds before it is sent on;
- ``reset()``: every open connection is closed with a TCP RST (new ones are fine);
- ``heal()``: back to a plain pipe (what was swallowed stays lost).

Each switch is stamped (``switched_at``, HOST monotonic) so a test measures from the
event itself.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

PASS, BLACKHOLE, DROP_REPLIES, STALL = "pass", "blackhole", "drop_replies", "stall"


class FaultProxy:
    """A loopback TCP proxy to ``host:port`` whose network a test can break (see above)."""

    def __init__(self, host: str, port: int, userinfo: str = "") -> None:
        self.upstream = (host, port)
        self.userinfo = userinfo  # the server's credentials, for ``url``
        self.mode = PASS
        self.delay_s = 0.0
        self.switched_at = time.monotonic()
        self.forwarded_down = 0  # reply bytes that reached the client
        self._moving = threading.Condition()
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()

    @classmethod
    def to(cls, url: str) -> FaultProxy:
        """A proxy to the single server at ``url`` (``valkey://host:port``)."""
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        return cls(parts.hostname, parts.port, parts.netloc.rpartition("@")[0])

    def url(self, query: str = "") -> str:
        """The server's URL through this proxy (its credentials kept; ``query`` appended)."""
        who = f"{self.userinfo}@" if self.userinfo else ""
        return f"valkey://{who}127.0.0.1:{self.port}" + (f"/?{query}" if query else "")

    # -- the switches ----------------------------------------------------------------

    def _switch(self, mode: str, delay_s: float = 0.0) -> None:
        with self._moving:
            self.mode, self.delay_s = mode, delay_s
            self.switched_at = time.monotonic()
            self._moving.notify_all()

    def blackhole(self) -> None:
        self._switch(BLACKHOLE)

    def drop_replies(self) -> None:
        self._switch(DROP_REPLIES)

    def stall(self) -> None:
        self._switch(STALL)

    def latency(self, seconds: float) -> None:
        self._switch(PASS, seconds)

    def heal(self) -> None:
        self._switch(PASS)

    def reset(self) -> None:
        """Close every open connection with an RST (``SO_LINGER`` 0)."""
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                s.close()
        self.switched_at = time.monotonic()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self.reset()
        self.heal()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the pipes -------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._socks += [client, server]
            for src, dst, down in ((client, server, False), (server, client, True)):
                threading.Thread(target=self._pump, args=(src, dst, down),
                                 daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, down: bool) -> None:
        try:
            while True:
                with self._moving:  # a stall reads nothing: the bytes wait in the kernel
                    self._moving.wait_for(lambda: self.mode != STALL or self._closed)
                data = src.recv(65536)
                if not data:
                    break
                mode, delay = self.mode, self.delay_s
                if mode == BLACKHOLE or (mode == DROP_REPLIES and down):
                    continue
                if delay:
                    time.sleep(delay)
                dst.sendall(data)
                if down:
                    self.forwarded_down += len(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

