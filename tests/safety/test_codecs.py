"""Payload codecs: Zlib and Fernet (rotation), stacked; what the server stores is coded,
a worker decodes it, and the CLI and the dashboard show "encrypted" without the keys and
decode with ``ECHOMQ_KEYS``."""

from __future__ import annotations

import datetime as dt
import zlib
from typing import Any

import pytest
from cryptography.fernet import Fernet as RawFernet

from echomq import codecs, errors
from echomq.core.payload import Format, decode, encode
from echomq.dashboard.insight.listing import preview
from echomq.tasks.app import App
from tests.support.cli import echomq
from tests.support.polling import wait_for
from tests.support.workers import serving

NEW, OLD = RawFernet.generate_key(), RawFernet.generate_key()


def test_zlib_then_fernet_hides_and_shrinks_and_reads_back() -> None:
    fmt = Format(codec=codecs.chain(codecs.Zlib(), codecs.Fernet(keys=[NEW])))
    args = ["secret-card-4242", "x" * 5_000]
    sealed = encode("pay", args, {}, fmt=fmt)
    assert sealed.startswith(codecs.MAGIC) and b"secret-card" not in sealed
    assert len(sealed) < 1_000  # compressed before it was encrypted
    steps, task, _ = codecs.header(sealed)
    assert task == "pay" and steps == ["zlib", f"fernet:{codecs.key_id(NEW)}"]
    assert decode(sealed, fmt) == ("pay", args, {})


def test_rotation_writes_with_the_first_key_and_reads_with_any() -> None:
    old = Format(codec=codecs.of(codecs.Fernet(keys=[OLD])))
    rotated = Format(codec=codecs.of([codecs.Fernet(keys=[NEW, OLD])]))
    written_before = encode("t", [1], fmt=old)
    assert decode(written_before, rotated)[1] == [1]
    written_after = encode("t", [2], fmt=rotated)
    assert codecs.header(written_after)[0] == [f"fernet:{codecs.key_id(NEW)}"]
    with pytest.raises(codecs.Sealed, match="no key"):
        decode(written_after, old)  # a fleet member without the new key cannot read it
    tampered = written_after[:-3] + (b"AAA" if written_after[-3:] != b"AAA" else b"BBB")
    with pytest.raises(ValueError):
        decode(tampered, rotated)


def test_a_reader_decodes_from_the_header_not_its_own_configuration() -> None:
    zipped = encode("t", [{"a": 1}], fmt=Format(codec=codecs.of(codecs.Zlib(9))))
    assert zlib.decompress(codecs.header(zipped)[2]).startswith(b'{"args"')
    assert decode(zipped) == ("t", [{"a": 1}], {})  # no codec configured: the header says


def test_without_keys_the_task_is_named_and_the_rest_hidden(monkeypatch) -> None:
    monkeypatch.delenv("ECHOMQ_KEYS", raising=False)
    sealed = encode("pay", ["secret"], fmt=Format(codec=codecs.of(codecs.Fernet([NEW]))))
    assert preview(sealed) == ("pay", "encrypted")
    monkeypatch.setenv("ECHOMQ_KEYS", f"{OLD.decode()},{NEW.decode()}")
    assert preview(sealed) == ("pay", '"secret"')


def test_a_worker_runs_coded_jobs_and_keeps_coded_results(url, queue, raw, tmp_path) -> None:
    app = App(url, codec=[codecs.Zlib(), codecs.Fernet(keys=[NEW, OLD])])
    seen: list[Any] = []

    @app.task(queue=queue, keep_result=60)
    def pay(card: str, when: dt.date) -> dict[str, Any]:
        seen.append((card, when))
        return {"charged": card[-4:], "on": when}

    job = pay.enqueue("4242-4242", dt.date(2026, 1, 2))
    stored = raw.hget(f"emq:{{{queue}}}:job:{job}", "payload")
    assert stored.startswith(codecs.MAGIC) and b"4242" not in stored
    # the CLI without the keys: the task named, the arguments "encrypted"
    shown = echomq("job", job, url=url)
    assert shown.returncode == 0, shown.stderr
    assert "pay" in shown.stdout and "encrypted" in shown.stdout and "4242" not in shown.stdout
    keyed = echomq("job", job, "--json", url=url, env={"ECHOMQ_KEYS": NEW.decode()})
    assert keyed.returncode == 0 and '"4242-4242"' in keyed.stdout, keyed.stderr
    try:
        with serving(app, [queue]):
            assert app.result(job, timeout=20) == {"charged": "4242", "on": dt.date(2026, 1, 2)}
    finally:
        app.close()
    assert seen == [("4242-4242", dt.date(2026, 1, 2))]
    kept = raw.get(f"emq:{{{queue}}}:result:{job}")
    assert kept.startswith(codecs.MAGIC) and b"4242" not in kept
    # the kept result: "encrypted" without the keys, decoded with them
    assert '"result": "encrypted"' in echomq("job", job, "--json", url=url).stdout
    keyed = echomq("job", job, "--json", url=url, env={"ECHOMQ_KEYS": NEW.decode()})
    assert keyed.returncode == 0, keyed.stderr
    assert '"charged": "4242"' in keyed.stdout


def test_a_chain_under_a_codec_feeds_results_and_keeps_them_coded(url, queue, raw) -> None:
    from echomq.tasks.canvas import chain

    app = App(url, codec=codecs.Fernet(keys=[NEW]))

    @app.task(queue=queue)
    def first(n: int) -> dict[str, Any]:
        return {"n": n, "on": dt.date(2026, 3, 4)}

    @app.task(queue=queue, keep_result=60)
    def second(prev: dict[str, Any]) -> str:
        return f"{prev['n'] + 1} {prev['on'].isoformat()}"

    job = chain(first.s(41), second.s()).enqueue()
    for key in raw.scan_iter(f"emq:{{{queue}}}:job:*"):
        payload = raw.hget(key, "payload")
        assert payload.startswith(codecs.MAGIC) and b"flow" not in payload
    try:
        with serving(app, [queue]):
            last = job if isinstance(job, str) else job.id
            assert app.result(last, timeout=20) == "42 2026-03-04"
    finally:
        app.close()


def test_a_worker_without_the_key_fails_the_job_naming_the_key(url, queue, monkeypatch
                                                                ) -> None:
    monkeypatch.delenv("ECHOMQ_KEYS", raising=False)
    producer = App(url, codec=codecs.Fernet(keys=[NEW]))
    keyless = App(url)

    def secret(x: str) -> None: ...

    sent = producer.task(queue=queue, name="secret")(secret)
    keyless.task(queue=queue, name="secret", max_attempts=1)(secret)
    job = sent.enqueue("hidden")
    try:
        with serving(keyless, [queue]), pytest.raises(errors.JobFailed) as ended:
            keyless.result(job, timeout=20)
        info = keyless.job(job, queue)
    finally:
        producer.close()
        keyless.close()
    assert info is not None and info.state == "dead" and info.task == "secret"
    assert f"no key for fernet:{codecs.key_id(NEW)}" in (info.error or ""), ended.value


def test_a_recurrence_template_goes_through_the_codec(url, queue, raw, monkeypatch) -> None:
    """A registered recurrence's stored arguments are sealed like a job's payload; the
    occurrences the Pump mints from it decode in the worker; the CLI shows "encrypted"
    without the keys and decodes with them; a worker restart keeps the stored template
    (sealed anew each process, compared decoded) instead of rewriting it."""
    monkeypatch.delenv("ECHOMQ_KEYS", raising=False)
    app = App(url, codec=[codecs.Zlib(), codecs.Fernet(keys=[NEW])])
    seen: list[Any] = []

    @app.every(dt.timedelta(milliseconds=200), args=["card-9191"],
               kwargs={"on": dt.date(2026, 5, 1)})
    @app.task(queue=queue)
    def bill(card: str, on: dt.date) -> None:
        seen.append((card, on))

    record = f"emq:{{{queue}}}:repeat:{bill.name}"
    try:
        with serving(app, [queue]):
            wait_for(lambda: bool(seen), 20, "an occurrence ran")
        stored = raw.hget(record, "template")
        assert stored.startswith(codecs.MAGIC) and b"9191" not in stored
        assert seen and seen[0] == ("card-9191", dt.date(2026, 5, 1))
        # a second worker start seals the template anew: the stored one is kept
        with serving(app, [queue]):
            pass
        assert raw.hget(record, "template") == stored
    finally:
        app.close()
    listed = echomq("repeat", "list", "--queue", queue, "--json", url=url)
    assert listed.returncode == 0, listed.stderr
    assert '"template": "encrypted"' in listed.stdout and "9191" not in listed.stdout
    keyed = echomq("repeat", "list", "--queue", queue, "--json", url=url,
                   env={"ECHOMQ_KEYS": NEW.decode()})
    assert keyed.returncode == 0 and "card-9191" in keyed.stdout, keyed.stderr
