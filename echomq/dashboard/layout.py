"""The pages' frame: the shell every page is drawn in, its crumbs and forms, the small
pages (message, unreachable, login) and how a time is shown (a SERVER-clock ms as UTC with a
``data-ms`` the script turns into the browser's zone)."""

from __future__ import annotations

from datetime import UTC, datetime

from echomq.dashboard.charts import NONE, duration
from echomq.dashboard.web import Request, e, q

PAGE = 50
STATE_LABELS = {
    "pending": "Pending", "scheduled": "Scheduled", "active": "Active",
    "completed": "Completed", "dead": "Dead", "cancelled": "Cancelled",
    "expired": "Expired", "waiting-children": "Waiting children",
    "waiting": "Waiting (signal)",
}
SCORE_MEANING = {
    "pending": "priority", "scheduled": "run at", "active": "lease until",
    "completed": "completed", "dead": "died", "cancelled": "cancelled",
    "expired": "expired", "waiting-children": "waiting since", "waiting": "waiting since",
}


def utc(ms: int | None) -> str:
    if ms is None:
        return NONE
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def when(ms: int | None, now_ms: int | None = None) -> str:
    """A ``<time>`` in UTC with its ms for the script (browser zone, countdown)."""
    if ms is None:
        return NONE
    rel = ""
    if now_ms is not None:
        d = ms - now_ms
        rel = (f" <span class='rel' data-ms='{ms}'>"
               f"{'in ' + duration(d) if d >= 0 else duration(-d) + ' ago'}</span>")
    return (f"<time datetime='{e(utc(ms))}' data-ms='{ms}'>{e(utc(ms))}</time>"
            f"<span class='local' data-ms='{ms}'></span>{rel}")


def post_form(req: Request, action: str, label: str, cls: str = "", confirm: str = "",
              hidden: dict[str, str] | None = None) -> str:
    """A one-button form that POSTs to ``action`` (an action path below the mount)."""
    fields = "".join(f"<input type='hidden' name='{e(k)}' value='{e(v)}'>"
                     for k, v in (hidden or {}).items())
    ask = f" data-confirm='{e(confirm)}'" if confirm else ""
    return (f"<form method='post' action='{e(req.url(action))}' class='inline'{ask}>"
            f"{fields}<button class='{cls}'>{e(label)}</button></form>")


def shell(req: Request, title: str, body: str, crumbs: str = "", now_ms: int | None = None,
          live: bool = False) -> str:
    root = e(req.root)
    now_attr = f" data-server-now='{now_ms}'" if now_ms is not None else ""
    live_attr = f" data-events='{e(req.url('/events'))}'" if live else ""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{e(title)} · EchoMQ</title>"
        f"<link rel='icon' href='{root}/static/favicon.svg' type='image/svg+xml'>"
        f"<link rel='stylesheet' href='{root}/static/dashboard.css'>"
        f"<script src='{root}/static/dashboard.js' defer></script></head>"
        f"<body data-root='{root}'{now_attr}{live_attr}>"
        f"<header class='top'><a class='brand' href='{root}/'><span class='logo'>◷</span> "
        "EchoMQ</a><nav>"
        f"<a href='{root}/'>Queues</a><a href='{root}/tasks'>Tasks</a>"
        f"<a href='{root}/workers'>Workers</a><a href='{root}/busy'>Busy</a>"
        f"<a href='{root}/backoff'>Backoff</a>"
        f"<a href='{root}/metrics'>Metrics</a></nav>"
        f"<form class='search' method='get' action='{root}/find'><input name='id' "
        "placeholder='Find a job by id' aria-label='job id' size='30'></form>"
        "<div class='clocks' id='clocks'>"
        + (f"server <b id='server-clock' data-ms='{now_ms}'>{e(utc(now_ms)[11:23])}</b>"
           " <span class='js'>· browser <b id='browser-clock'></b> · skew "
           "<b id='skew'></b></span>" if now_ms is not None else "")
        + "</div></header>"
        "<div id='banner' class='banner' role='status' hidden></div>"
        f"<main>{crumbs}<h1>{e(title)}</h1>{body}</main>"
        "<footer>EchoMQ · times are UTC (the server's clock); "
        "<span class='js'>your zone is shown beside them</span></footer></body></html>"
    )


def message(req: Request, title: str, text: str) -> str:
    return shell(req, title, f"<p class='note'>{e(text)}</p>")


def unreachable(req: Request, detail: str) -> str:
    body = (
        "<div class='banner down'>The Valkey server is not answering. The dashboard keeps "
        "trying; this page reloads by itself.</div>"
        f"<p class='note'>{e(detail)}</p>"
        "<meta http-equiv='refresh' content='3'>"
    )
    return shell(req, "Valkey unreachable", body)


def login(req: Request, error: str) -> str:
    err = f"<p class='error'>{e(error)}</p>" if error else ""
    body = (
        f"{err}<p>This dashboard needs its access token (printed when it started, or the "
        "value of <code>--token</code> / <code>ECHOMQ_DASHBOARD_TOKEN</code>).</p>"
        f"<form method='post' action='{e(req.url('/login'))}' class='login'>"
        "<input type='password' name='token' autocomplete='current-password' "
        "aria-label='access token' placeholder='access token' autofocus> "
        "<button>Sign in</button></form>"
    )
    return shell(req, "Sign in", body)


def crumbs(req: Request, queue: str | None = None, extra: str = "") -> str:
    out = f"<a href='{e(req.url('/'))}'>Queues</a>"
    if queue is not None:
        out += f" / <a href='{e(req.url('/q/' + q(queue)))}'>{e(queue)}</a>"
    if extra:
        out += f" / {e(extra)}"
    return f"<div class='crumbs'>{out}</div>"
