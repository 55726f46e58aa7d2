"""Per-task metrics on the server (``verbs.taskmetrics``): totals, minute buckets in
five-minute windows that expire a day after they end, reads and the pure summaries."""

from __future__ import annotations

import pytest

from echomq.verbs import jobs, taskmetrics
from echomq.verbs.taskmetrics import CODES, SUM_AT, empty, quantile


def slots(**codes: int) -> list[int]:
    out = empty()
    for code, n in codes.items():
        out[CODES.index(code)] = n
    return out


def test_record_then_totals_and_history(run, raw, queue):
    now = run(jobs.server_now_ms)
    minute_ms = now // 60_000 * 60_000
    # 3 completed in 2 buckets, 1 retried; then a minute ago 2 dead
    run(taskmetrics.record, queue, {"mail.send": slots(c=3, r=1, h2=3, h5=1, s=400_000)},
        minute_ms + 1)
    run(taskmetrics.record, queue, {"mail.send": slots(d=2, h13=2, s=130_000_000),
                                    "img.resize": slots(c=1, h0=1, s=1_000)},
        minute_ms - 60_000)
    tot = run(taskmetrics.totals, queue)
    assert sorted(tot) == ["img.resize", "mail.send"]
    mail = tot["mail.send"]
    assert mail.runs == {"completed": 3, "retried": 1, "dead": 2, "cancelled": 0,
                         "timed_out": 0}
    assert mail.count == 6 and mail.failures == 3
    assert mail.sum_s == pytest.approx(130.4)
    hist = run(taskmetrics.history, queue, ["mail.send", "img.resize"], 3, now_ms=now)
    h = hist["mail.send"]
    assert h.first_minute == now // 60_000 - 2 and len(h.minutes) == 3
    assert h.minutes[-1] == slots(c=3, r=1, h2=3, h5=1, s=400_000)
    assert h.minutes[-2] == slots(d=2, h13=2, s=130_000_000)
    assert h.minutes[0] == empty()
    assert h.span(1).runs["completed"] == 3 and h.span(3).total == 6
    assert hist["img.resize"].span(3).runs["completed"] == 1
    # only the codes that moved are written; a window expires a day after it ends
    w = (minute_ms // 60_000) // 5
    key = taskmetrics.window_key(queue, "mail.send", w)
    m = (minute_ms // 60_000) % 5
    mine = {k: v for k, v in raw.hgetall(key).items() if k.startswith(f"{m}:".encode())}
    assert mine == {f"{m}:{c}".encode(): str(n).encode() for c, n in
                                (("c", 3), ("r", 1), ("h2", 3), ("h5", 1), ("s", 400_000))}
    expire_at = raw.expiretime(key)
    assert expire_at == (w + 1) * 300 + 86_400


def test_history_reads_the_server_clock_by_default(run, queue):
    now = run(jobs.server_now_ms)
    run(taskmetrics.record, queue, {"t": slots(c=2, h1=2)}, now)
    got = run(taskmetrics.history, queue, ["t"], 60)
    assert got["t"].span(60).runs["completed"] == 2
    assert run(taskmetrics.history, queue, [], 60) == {}


def test_a_day_of_windows_reads_back_minute_by_minute(run, queue):
    now = run(jobs.server_now_ms)
    batch = {}
    for back in range(0, 1440, 7):  # one run every 7 minutes over the day
        run(taskmetrics.record, queue, {"t": slots(c=1, h3=1, s=20_000)}, now - back * 60_000)
        batch[now // 60_000 - back] = 1
    h = run(taskmetrics.history, queue, ["t"], 1440, now_ms=now)["t"]
    seen = {h.first_minute + i: s[0] for i, s in enumerate(h.minutes) if s[0]}
    assert seen == batch
    per_hour = h.per(60)
    assert len(per_hour) == 24 and sum(t.total for t in per_hour) == len(batch)


def test_bad_input_writes_nothing(run, raw, queue):
    with pytest.raises(ValueError):
        run(taskmetrics.record, queue, {"t": [1, 2]}, 0)
    with pytest.raises(ValueError):
        run(taskmetrics.record, queue, {"": slots(c=1)}, 0)
    with pytest.raises(ValueError):
        run(taskmetrics.record, queue, {"t": slots(c=-1)}, 0)
    with pytest.raises(ValueError):
        run(taskmetrics.record, queue, {"t": slots(c=1)}, -5)
    with pytest.raises(ValueError):
        run(taskmetrics.history, queue, ["t"], 0)
    with pytest.raises(ValueError):
        run(taskmetrics.history, queue, ["t"], 1441)
    with pytest.raises(ValueError):
        run(taskmetrics.record, "bad{q}", {"t": slots(c=1)}, 0)
    assert raw.keys(f"emq:{{{queue}}}:*") == []


def test_quantile_interpolates_inside_a_bucket():
    b = [0] * taskmetrics.N_BUCKETS
    assert quantile(b, 0.5) is None
    b[2] = 10  # ten runs in (0.01, 0.025]
    assert quantile(b, 0.5) == pytest.approx(0.0175)
    assert quantile(b, 1.0) == pytest.approx(0.025)
    b[-1] = 90  # most past the last bound: the quantile answers that bound
    assert quantile(b, 0.95) == taskmetrics.BUCKETS_S[-1]
    s = taskmetrics.summarize(taskmetrics.tally_of(slots(c=8, r=1, t=1, h0=10)), 10)
    assert s.failure_rate == pytest.approx(0.2) and s.per_minute == 1.0
    assert s.p50_s == pytest.approx(0.0025)
    assert taskmetrics.summarize(taskmetrics.tally_of(empty()), 60).failure_rate is None
    assert len(CODES) - 1 == SUM_AT
