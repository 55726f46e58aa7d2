"""A browser that disconnects from the standalone dashboard mid-request prints nothing
(issue 32: it printed a ConnectionResetError traceback); the server keeps serving."""

from __future__ import annotations

import socket
import struct
import time

from echomq import dashboard
from tests.support.board import Client


def test_a_reset_connection_prints_no_traceback(conn, queue, capfd):
    httpd = dashboard.serve(conn, port=0, queues=[queue])
    port = httpd.server_address[1]
    try:
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1")  # the request, cut short
            # close with a reset (SO_LINGER 0), as a browser tab killed mid-request does
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        time.sleep(0.3)  # the handler threads meet the reset
        code, _ = Client(port).get("/")
        assert code == 200
    finally:
        httpd.shutdown()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ConnectionResetError" not in err, err
