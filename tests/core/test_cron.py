"""The cron parser and its next run in an IANA zone, DST changes included (pure: no server)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echomq.core import cron


def at(text: str, tz: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz))


def runs(expr: str, start: str, tz: str, n: int) -> list[str]:
    return [r.isoformat() for r in cron.parse(expr).runs(at(start, tz), n, tz)]


# -- parsing ------------------------------------------------------------------------------


def test_fields_and_lists() -> None:
    c = cron.parse("0,30 9-17/2 1,15 jan-mar MON-fri")
    assert c.minutes == {0, 30}
    assert c.hours == {9, 11, 13, 15, 17}
    assert c.days == {1, 15}
    assert c.months == {1, 2, 3}
    assert c.weekdays == {1, 2, 3, 4, 5}


def test_steps_from_a_start_and_sunday_as_seven() -> None:
    assert cron.parse("5/20 * * * *").minutes == {5, 25, 45}
    assert cron.parse("* * * * 7").weekdays == {0}
    assert cron.parse("* * * * 0").weekdays == {0}


@pytest.mark.parametrize(
    ("alias", "expanded"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@HOURLY", "0 * * * *"),
    ],
)
def test_aliases(alias: str, expanded: str) -> None:
    assert cron.validate(alias) == expanded


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "* * * *",
        "* * * * * *",
        "60 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * * 13 *",
        "* * * * 8",
        "5-1 * * * *",
        "*/0 * * * *",
        "a * * * *",
        "1,,2 * * * *",
        "@every_minute",
        "0 0 30 2 *",
        "0 0 31 4,6 *",
    ],
)
def test_bad_expressions_are_refused(bad: str) -> None:
    with pytest.raises(cron.CronError):
        cron.parse(bad)


def test_bad_zone_and_type() -> None:
    with pytest.raises(cron.CronError, match="unknown time zone"):
        cron.next_runs("* * * * *", 1, "Mars/Olympus")
    with pytest.raises(TypeError):
        cron.parse(5)  # type: ignore[arg-type]


# -- next runs on ordinary days -----------------------------------------------------------


def test_next_is_strictly_after() -> None:
    start = at("2026-06-01T09:00", "UTC")
    assert cron.parse("0 9 * * *").next_after(start, "UTC") == at("2026-06-02T09:00", "UTC")
    assert cron.parse("* * * * *").next_after(start, "UTC") == at("2026-06-01T09:01", "UTC")


def test_day_of_month_or_day_of_week_when_both_restricted() -> None:
    # the 13th of the month OR a Friday (classic cron); 2026-02-06 is a Friday
    got = runs("0 0 13 * 5", "2026-02-05T12:00", "UTC", 3)
    assert got == [
        "2026-02-06T00:00:00+00:00",
        "2026-02-13T00:00:00+00:00",
        "2026-02-20T00:00:00+00:00",
    ]


def test_weekdays_and_month_ends() -> None:
    assert runs("30 8 * * mon-fri", "2026-01-02T09:00", "UTC", 3) == [
        "2026-01-05T08:30:00+00:00",
        "2026-01-06T08:30:00+00:00",
        "2026-01-07T08:30:00+00:00",
    ]
    assert runs("0 0 29 2 *", "2026-01-01T00:00", "UTC", 2) == [
        "2028-02-29T00:00:00+00:00",
        "2032-02-29T00:00:00+00:00",
    ]


def test_next_ms_matches_next_after() -> None:
    start = at("2026-05-05T10:17:31.250", "Asia/Tokyo")
    ms = int(start.timestamp() * 1000)
    nxt = cron.next_ms("*/15 * * * *", ms, "Asia/Tokyo")
    assert datetime.fromtimestamp(nxt / 1000, ZoneInfo("Asia/Tokyo")) == at(
        "2026-05-05T10:30", "Asia/Tokyo"
    )


def test_zone_shifts_the_instant() -> None:
    paris = cron.parse("0 9 * * *").next_after(at("2026-07-01T00:00", "UTC"), "Europe/Paris")
    assert paris.astimezone(UTC) == at("2026-07-01T07:00", "UTC")


# -- DST: a pinned 02:30 job runs once on both change days --------------------------------

DST_DAYS = [
    # zone, spring-forward day, fall-back day
    ("Europe/Paris", "2026-03-29", "2026-10-25"),
    ("America/New_York", "2026-03-08", "2026-11-01"),
]


@pytest.mark.parametrize(("tz", "spring", "fall"), DST_DAYS)
def test_spring_forward_pinned_job_runs_once_at_the_next_valid_instant(
    tz: str, spring: str, fall: str
) -> None:
    day_before = (datetime.fromisoformat(spring) - timedelta(days=1)).date().isoformat()
    got = cron.parse("30 2 * * *").runs(at(f"{day_before}T12:00", tz), 3, tz)
    # 02:30 does not exist on the change day: it runs once, at 03:00 (the gap's end)
    assert got[0] == at(f"{spring}T03:00", tz)
    assert got[0].utcoffset() != at(f"{day_before}T12:00", tz).utcoffset()
    # and the day after it is 02:30 again, one run per day
    assert [g.date().isoformat() for g in got] == [
        spring,
        (datetime.fromisoformat(spring) + timedelta(days=1)).date().isoformat(),
        (datetime.fromisoformat(spring) + timedelta(days=2)).date().isoformat(),
    ]
    assert got[1].hour == 2 and got[1].minute == 30


@pytest.mark.parametrize(("tz", "spring", "fall"), DST_DAYS)
def test_fall_back_pinned_job_runs_once_not_twice(tz: str, spring: str, fall: str) -> None:
    # the repeated hour: 02:xx in Paris (03:00 CEST -> 02:00 CET), 01:xx in New York
    hour = 2 if tz == "Europe/Paris" else 1
    expr = f"30 {hour} * * *"
    day_before = (datetime.fromisoformat(fall) - timedelta(days=1)).date().isoformat()
    got = cron.parse(expr).runs(at(f"{day_before}T12:00", tz), 3, tz)
    on_day = [g for g in got if g.date().isoformat() == fall]
    assert len(on_day) == 1
    # the first of the two instants (still on summer time)
    first = datetime.fromisoformat(f"{fall}T{hour:02d}:30").replace(tzinfo=ZoneInfo(tz), fold=0)
    assert on_day[0].astimezone(UTC) == first.astimezone(UTC)
    # aware datetimes in one zone subtract as wall clocks; compare real time in UTC
    assert got[1].astimezone(UTC) - got[0].astimezone(UTC) == timedelta(hours=25)


@pytest.mark.parametrize(("tz", "spring", "fall"), DST_DAYS)
def test_wildcard_hour_job_keeps_real_cadence_across_both_changes(
    tz: str, spring: str, fall: str
) -> None:
    for day in (spring, fall):
        start = at(f"{day}T00:00", tz)
        got = [g.astimezone(UTC) for g in cron.parse("0 * * * *").runs(start, 6, tz)]
        gaps = {(b - a) for a, b in itertools.pairwise(got)}
        # an hourly job is an hourly job in real time, whatever the wall clock does
        assert gaps == {timedelta(hours=1)}, (day, [g.isoformat() for g in got])
        assert len(set(got)) == 6


def test_spring_forward_collapses_the_gap_into_one_run() -> None:
    tz = "Europe/Paris"
    # every 15 minutes during the 2 o'clock hour: none of them exists on 2026-03-29
    got = cron.parse("*/15 2 * * *").runs(at("2026-03-29T00:00", tz), 2, tz)
    assert got[0] == at("2026-03-29T03:00", tz)
    assert got[1] == at("2026-03-30T02:00", tz)


def test_fall_back_wildcard_minutes_fire_through_both_passes() -> None:
    tz = "America/New_York"
    got = cron.parse("*/30 * * * *").runs(at("2026-11-01T00:45", tz), 6, tz)
    utc = [g.astimezone(UTC).strftime("%H:%M") for g in got]
    # 01:00 EDT, 01:30 EDT, 01:00 EST, 01:30 EST, 02:00 EST, 02:30 EST: every 30 real minutes
    assert utc == ["05:00", "05:30", "06:00", "06:30", "07:00", "07:30"]


def test_next_runs_default_after_is_host_now() -> None:
    got = cron.next_runs("@hourly", 2, "UTC")
    now = datetime.now(UTC)
    assert now < got[0] <= now + timedelta(hours=1)
    assert got[1] - got[0] == timedelta(hours=1)


# -- the search against a brute force, around real transitions ----------------------------

TRANSITIONS = [
    ("Europe/Paris", "2026-03-29T01:00"),
    ("Europe/Paris", "2026-10-25T01:00"),
    ("America/New_York", "2026-03-08T07:00"),
    ("America/New_York", "2026-11-01T06:00"),
    ("Australia/Lord_Howe", "2026-04-04T15:00"),  # a 30-minute change
    ("Australia/Lord_Howe", "2026-10-03T15:30"),
    ("America/Havana", "2026-03-08T05:00"),  # changes at midnight local
    ("America/Havana", "2026-11-01T05:00"),
    ("Asia/Tokyo", "2026-06-01T00:00"),  # no DST at all
]


def brute_next(c: cron.Cron, after: datetime, tz: str) -> datetime:
    """Every wall minute of two days, mapped by the same gap/fold rule, the least after."""
    zi = ZoneInfo(tz)
    wall = after.astimezone(zi).replace(tzinfo=None, second=0, microsecond=0)
    wall -= timedelta(hours=6)
    best = None
    for _ in range(2 * 1440):
        if c._day_matches(wall.date()) and wall.hour in c.hours and wall.minute in c.minutes:
            for instant in c._instants(wall, zi):
                if instant > after and (best is None or instant < best):
                    best = instant
        wall += timedelta(minutes=1)
    assert best is not None
    return best


@pytest.mark.slow
@pytest.mark.parametrize(("tz", "utc"), TRANSITIONS)
@pytest.mark.parametrize("expr", ["* * * * *", "*/7 * * * *", "30 2 * * *", "0 0 * * *",
                                  "15,45 1-3 * * *", "0 * * * *"])  # fmt: skip
def test_search_matches_brute_force_around_transitions(tz: str, utc: str, expr: str) -> None:
    c = cron.parse(expr)
    center = datetime.fromisoformat(utc).replace(tzinfo=UTC)
    # every 25 minutes through the six hours around the transition
    for step in range(-7, 8):
        after = center + timedelta(minutes=25 * step, seconds=17)
        # compare in UTC: PEP 495 makes an ambiguous wall time unequal across zones
        got = c.next_after(after, tz).astimezone(UTC)
        assert got == brute_next(c, after, tz), (expr, tz, after)


def _field(values: list[int], low: int, high: int) -> st.SearchStrategy[str]:
    step = st.integers(1, 9).map(lambda n: f"*/{n}")
    one = st.sampled_from(values).map(str)
    span = st.tuples(st.integers(low, high), st.integers(0, 5)).map(
        lambda t: f"{t[0]}-{min(high, t[0] + t[1])}"
    )
    return st.one_of(st.just("*"), step, one, span, st.lists(one, min_size=1, max_size=3)
                     .map(lambda xs: ",".join(xs)))  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    minute=_field([0, 15, 30, 45, 59], 0, 59),
    hour=_field([0, 1, 2, 3, 12, 23], 0, 23),
    tz=st.sampled_from([t for t, _ in TRANSITIONS]),
    when=st.sampled_from([u for _, u in TRANSITIONS]),
    offset_min=st.integers(-240, 240),
)
def test_search_matches_brute_force_for_generated_expressions(
    minute: str, hour: str, tz: str, when: str, offset_min: int
) -> None:
    c = cron.parse(f"{minute} {hour} * * *")
    after = datetime.fromisoformat(when).replace(tzinfo=UTC) + timedelta(minutes=offset_min)
    assert c.next_after(after, tz).astimezone(UTC) == brute_next(c, after, tz)
