"""OpenTelemetry spans (opentelemetry-api + the SDK's in-memory exporter): an enqueue span
whose context rides in the payload, and a run span in the same trace, its child; a failing
run is marked failed. Without the API nothing changes (the payload has no "trace")."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from echomq.runtime import tracing
from echomq.tasks.app import App
from echomq.tasks.worker import Worker
from echomq.verbs import jobs

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider() -> None:
    p = TracerProvider()
    p.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(p)  # once per process (the API refuses a second)


def run_until(app: App, queue: str, done: Any) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        run = asyncio.ensure_future(Worker(app, [queue], concurrency=2, beat_ms=50).run(stop))
        deadline = time.monotonic() + 15
        while not done() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        await run

    asyncio.run(main())


def test_a_run_joins_the_trace_that_queued_it(url, queue):
    assert tracing.ENABLED
    EXPORTER.clear()
    app = App(url)

    @app.task(queue=queue, max_attempts=1)
    def work(n: int) -> int:
        if n < 0:
            raise ValueError("negative")
        return n

    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("request") as req:
        ok = work.enqueue(1)
        bad = work.enqueue(-1)
    body = json.loads(jobs.get(app.connector(queue), queue, ok)["payload"])
    assert body["trace"]["traceparent"].split("-")[1] == f"{req.get_span_context().trace_id:032x}"
    plain = json.loads(work.payload(1))  # a template or a preview carries no trace
    assert "trace" not in plain

    def runs() -> list[Any]:
        return [s for s in EXPORTER.get_finished_spans() if s.name == f"echomq run {work.name}"]

    run_until(app, queue, lambda: len(runs()) == 2)
    spans = EXPORTER.get_finished_spans()
    sends = [s for s in spans if s.name == f"echomq enqueue {work.name}"]
    assert len(sends) == 2 and all(s.kind == SpanKind.PRODUCER for s in sends)
    assert all(s.parent is not None and s.parent.span_id == req.get_span_context().span_id
               for s in sends)
    by_job = {s.attributes["messaging.message.id"]: s for s in runs()}
    assert set(by_job) == {ok, bad}
    for jid, send in zip((ok, bad), sends, strict=True):
        r = by_job[jid]
        assert r.kind == SpanKind.CONSUMER
        assert r.context.trace_id == req.get_span_context().trace_id
        assert r.parent is not None and r.parent.span_id == send.context.span_id
        assert r.attributes["messaging.destination.name"] == queue
    assert by_job[ok].status.status_code != StatusCode.ERROR
    assert by_job[bad].status.status_code == StatusCode.ERROR
    app.close()


def test_a_job_queued_without_a_trace_runs_in_a_root_span(url, queue):
    EXPORTER.clear()
    app = App(url)

    @app.task(queue=queue)
    def work() -> None: ...

    jid = work.enqueue()  # outside any trace: the payload is the plain one
    assert jobs.get(app.connector(queue), queue, jid)["payload"] == work.payload()
    run_until(app, queue, lambda: any(s.name == f"echomq run {work.name}"
                                      for s in EXPORTER.get_finished_spans()))
    (r,) = [s for s in EXPORTER.get_finished_spans() if s.name == f"echomq run {work.name}"]
    assert r.parent is None and r.attributes["messaging.message.id"] == jid
    app.close()


def test_without_the_api_nothing_changes():
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from echomq.runtime import tracing; from echomq.tasks.app import App\n"
        "assert not tracing.ENABLED\n"
        "app = App('valkey://127.0.0.1:1')\n"
        "@app.task()\n"
        "def work(n): return n\n"
        "assert work._sent(1) == work.payload(1) == b'{\"args\":[1],\"kwargs\":{},\"task\":\"' "
        "+ work.name.encode() + b'\"}'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_quiet_skips_spans_only_when_nothing_would_record_or_carry():
    # a fresh process: the API installed, no SDK provider set yet
    code = (
        "import json\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, use_span\n"
        "from echomq.runtime import tracing; from echomq.tasks.app import App\n"
        "app = App('valkey://127.0.0.1:1')\n"
        "@app.task()\n"
        "def work(n): return n\n"
        "assert tracing.quiet() and work._sent(1) == work.payload(1)\n"
        "assert tracing.traced(print, 'w', None) is print\n"
        "# a context handed in from elsewhere (e.g. a request's traceparent), still no SDK:\n"
        "# not quiet, and the payload carries that context on\n"
        "parent = SpanContext(0xabc, 0xdef, is_remote=True, trace_flags=TraceFlags(1))\n"
        "with use_span(NonRecordingSpan(parent)):\n"
        "    assert not tracing.quiet()\n"
        "    body = json.loads(work._sent(1))\n"
        "assert body['trace']['traceparent'].startswith('00-' + format(0xabc, '032x'))\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "assert not tracing.quiet()\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
