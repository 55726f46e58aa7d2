"""Every dashboard page and the /metrics scrape cost a bounded number of server commands,
measured on a queue of 1,000,000 jobs (INFO commandstats deltas on a server of its own)."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator

import pytest
import valkey

from echomq import Connector, dashboard
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') leaves this file out

SEED = """
local base, n, first, kind, at = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3],
  tonumber(ARGV[4])
local set = kind == 'scheduled' and 'schedule' or kind
local batch = {}
for i = first, first + n - 1 do
  local id = string.format('JOB01M8%022d', i)
  redis.call('HSET', base .. 'job:' .. id, 'state', kind, 'attempts', '0',
             'payload', '{"args":[' .. i .. '],"kwargs":{},"task":"bulk.job"}')
  batch[#batch + 1] = kind == 'scheduled' and (at + i) or 0
  batch[#batch + 1] = id
  if #batch >= 2000 then
    redis.call('ZADD', base .. set, unpack(batch)); batch = {}
  end
end
if #batch > 0 then redis.call('ZADD', base .. set, unpack(batch)) end
return n
"""

QUEUE = "million"
PENDING, SCHEDULED = 600_000, 400_000


@pytest.fixture(scope="module")
def seeded() -> Iterator[tuple[str, valkey.Valkey]]:
    srv = EmbeddedServer(ephemeral=True)
    srv.start()
    # a generous read timeout: seeding is a few CPU-seconds of Lua on a busy machine
    raw = valkey.Valkey.from_url(srv.url, socket_timeout=300)
    base = f"emq:{{{QUEUE}}}:"
    now = int(raw.time()[0]) * 1000
    step = 50_000
    for first in range(0, PENDING, step):
        raw.eval(SEED, 1, base, step, first, "pending", 0)
    for first in range(PENDING, PENDING + SCHEDULED, step):
        raw.eval(SEED, 1, base, step, first, "scheduled", now - PENDING)
    yield srv.url, raw
    raw.close()
    srv.stop()


def calls(raw: valkey.Valkey) -> dict[str, int]:
    stats = raw.info("commandstats")
    skip = {"info", "config|resetstat", "hello", "client|setinfo", "ping"}
    out = {}
    for name, v in stats.items():
        cmd = name.removeprefix("cmdstat_")
        if cmd not in skip:
            out[cmd] = int(v["calls"])
    return out


def test_every_page_costs_a_bounded_number_of_commands(seeded):
    url, raw = seeded
    conn = Connector.connect(url)
    counts = jobs.counts(conn, QUEUE)
    assert counts["pending"] + counts["scheduled"] == 1_000_000
    dead_id = ids.mint()
    jobs.enqueue(conn, QUEUE, dead_id, b"x")
    httpd = dashboard.serve(conn, port=0, queues=[QUEUE])
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    now = jobs.server_now_ms(conn)
    some = f"JOB01M8{700_123:022d}"
    second = None
    pages = {
        "overview": "/",
        "pending": f"/q/{QUEUE}?state=pending",
        "scheduled": f"/q/{QUEUE}?state=scheduled",
        "job": f"/q/{QUEUE}/job/{some}",
        "clock": f"/q/{QUEUE}/clock",
        "release": f"/api/q/{QUEUE}/release?at={now}",
        "registrations": f"/q/{QUEUE}/repeat",
        "metrics": "/metrics",
        "api": "/api/queues",
        "backoff": "/backoff",
    }
    measured: dict[str, int] = {}
    try:
        for name, path in pages.items():
            raw.config_resetstat()
            with urllib.request.urlopen(base + path, timeout=60) as r:
                body = r.read().decode()
                assert r.status == 200
            used = calls(raw)
            measured[name] = sum(used.values())
            assert "scan" not in used and "keys" not in used, (name, used)
            if name == "pending":
                m = re.search(r"href='([^']+)'>next 50", body)
                assert m
                second = m.group(1).replace("&amp;", "&")
        assert second is not None
        raw.config_resetstat()
        with urllib.request.urlopen(base + second, timeout=60) as r:
            assert r.status == 200
        measured["pending page 2"] = sum(calls(raw).values())
    finally:
        httpd.shutdown()
        httpd.server_close()
        conn.close()
    print("\ncommands per page on a 1,000,000-job queue:", measured)
    # a list page: its ids (1) + one HMGET per row (50) + a few fixed reads
    for name in ("pending", "scheduled", "pending page 2"):
        assert measured[name] <= 80, (name, measured)
    for name in ("overview", "job", "clock", "release", "registrations", "metrics", "api"):
        assert measured[name] <= 25, (name, measured)
    assert measured["backoff"] == 0
