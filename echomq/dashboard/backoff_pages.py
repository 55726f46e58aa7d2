"""The backoff explorer (the curve a policy gives, attempt by attempt: fixed, exponential,
a list of delays whose last repeats, each with full jitter or not; pure, no clock) and a
task's retry policy as a backoff policy, which the Tasks pages (``task_pages``) link to."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import urlencode

from echomq.core import backoff
from echomq.core.times import parse_duration
from echomq.dashboard import charts
from echomq.dashboard.charts import DASH, duration
from echomq.dashboard.layout import shell
from echomq.dashboard.web import Request, e

# -- backoff ------------------------------------------------------------------------------

def task_policy(task: Any) -> tuple[backoff.Policy, int]:
    """A Task's retry policy as a backoff policy (a fixed ``retry_delay_ms`` without one)
    and its max attempts."""
    policy = task.backoff or ("fixed", int(task.retry_delay_ms))
    return policy, int(task.max_attempts)


def backoff_words(policy: backoff.Policy) -> str:
    """A retry policy as a backoff a person reads: ``waits 200 ms, 500 ms, then 1.0 s
    before each later retry``, ``waits 5.0 s before each retry``, ``waits 1.0 s, doubling
    up to 1m 00s``."""
    if backoff.is_steps(policy):
        waits = [duration(ms) for ms in backoff.normalize(policy)]
        if len(waits) == 1:
            return f"waits {waits[0]} before each retry"
        return f"waits {', '.join(waits[:-1])}, then {waits[-1]} before each later retry"
    if policy[0] == "jitter":
        return f"{backoff_words(policy[1])}, each wait jittered"
    if policy[0] == "fixed":
        return f"waits {duration(policy[1])} before each retry"
    return f"waits {duration(policy[1])}, doubling up to {duration(policy[2])}, before a retry"


def _policy_args(policy: backoff.Policy) -> dict[str, str]:
    if backoff.is_steps(policy):
        return {"kind": "list", "steps": ",".join(str(ms) for ms in backoff.normalize(policy))}
    if policy[0] == "jitter":
        return {**_policy_args(policy[1]), "jitter": "1"}
    if policy[0] == "fixed":
        return {"kind": "fixed", "base": str(policy[1])}
    return {"kind": "exponential", "base": str(policy[1]), "cap": str(policy[2])}


def backoff_link(name: str, task: Any) -> str:
    policy, attempts = task_policy(task)
    return "/backoff?" + urlencode({**_policy_args(policy), "max_attempts": attempts,
                                    "task": name})


def _steps(text: str) -> list[int]:
    """``"1000, 5s, 30s"`` -> ``[1000, 5000, 30000]``: each a number of ms or a duration."""
    out = []
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        try:
            out.append(int(word) if word.isdigit() else parse_duration(word))
        except argparse.ArgumentTypeError as exc:
            raise ValueError(str(exc)) from None
    return out


def _policy_from(req: Request) -> tuple[backoff.Policy, int]:
    kind = req.arg("kind", "exponential")
    base = int(req.arg("base", "1000"))
    cap = int(req.arg("cap", "3600000"))
    attempts = int(req.arg("max_attempts", "10"))
    if not 1 <= attempts <= 100:
        raise ValueError("max_attempts must be 1..100")
    inner: backoff.Policy
    if kind == "list":
        inner = _steps(req.arg("steps", "1000,5000,30000"))
    else:
        inner = ("fixed", base) if kind == "fixed" else ("exponential", base, cap)
    policy = ("jitter", inner) if req.arg("jitter") else inner
    backoff.validate(policy)
    return policy, attempts


def backoff_page(req: Request, tasks: dict[str, Any] | None = None) -> str:
    named = req.arg("task")
    if named and tasks and named in tasks and not req.arg("kind"):
        policy, attempts = task_policy(tasks[named])
        req.query.update({k: [v] for k, v in _policy_args(policy).items()})
        req.query["max_attempts"] = [str(attempts)]
    policy, attempts = _policy_from(req)
    c = charts.curve(policy, attempts)
    kind = req.arg("kind", "exponential")
    rows = "".join(
        f"<tr><td class='n'>{a}</td><td class='n'>"
        f"{e(duration(lo)) + ' ' + DASH + ' ' if lo != hi else ''}{e(duration(hi))}</td>"
        f"<td class='n'>{e(duration(cum))}</td></tr>" for a, lo, hi, cum in c.rows)
    jit = bool(req.arg("jitter"))
    total = (f"between {duration(c.total_low_ms)} and {duration(c.total_ms)} "
             f"(on average {duration(c.total_ms / 2)})" if jit else duration(c.total_ms))
    sel = {k: " selected" if kind == k else "" for k in ("fixed", "exponential", "list")}
    steps = req.arg("steps", "1000,5000,30000")
    body = (
        f"<form method='get' action='{e(req.url('/backoff'))}' class='policy'>"
        f"<label>policy <select name='kind'><option{sel['exponential']}>exponential</option>"
        f"<option{sel['fixed']}>fixed</option><option{sel['list']}>list</option>"
        "</select></label>"
        "<label>base ms <input name='base' type='number' min='0' "
        f"value='{e(req.arg('base', '1000'))}'>"
        f"</label><label>cap ms <input name='cap' type='number' min='1' "
        f"value='{e(req.arg('cap', '3600000'))}'></label>"
        "<label title='the delays in order, comma-separated (ms or 5s, 2m); the last repeats'>"
        f"list <input name='steps' size='18' value='{e(steps)}'></label>"
        f"<label>max attempts <input name='max_attempts' type='number' min='1' max='100' "
        f"value='{attempts}'></label><label><input type='checkbox' name='jitter' value='1'"
        f"{' checked' if jit else ''}> full jitter</label> <button>draw</button></form>"
        + (f"<p>Task <b>{e(named)}</b>'s own policy.</p>" if named else "")
        + f"<p class='total'>Policy <code>{e(repr(policy))}</code>: a job that keeps failing is "
        f"dead-lettered at attempt {attempts}, <b id='backoff-total'>{e(total)}</b> after its "
        "first failure (handler time not counted).</p>"
        f"<div class='chart'>{charts.curve_svg(c)}</div>"
        "<p class='hint'>Bars: the delay before each retry (a light band for jitter: a uniform "
        "draw from 0 to the bar's top). Line: the cumulative time, right axis.</p>"
        "<table class='grid narrow'><thead><tr><th class='n'>after attempt</th>"
        f"<th class='n'>delay</th><th class='n'>cumulative</th></tr></thead><tbody>{rows}"
        "</tbody></table>"
    )
    return shell(req, "Backoff curve", body)
