"""A small arq app ported to EchoMQ: arq's docs example, as tasks
(``echomq worker tasks:app`` runs them; arq's ``arq tasks.WorkerSettings``).

The arq original is in docs/migrating.md; ``run.py`` makes the arq docs' calls the EchoMQ
way. arq passes ``ctx`` (a dict made by ``on_startup``) to every function; here the
app's ``on_startup`` fills the worker's context (``current_job().context``) once per worker
process and ``on_shutdown`` closes it, and the job's own facts (``ctx["job_try"]``,
``ctx["job_id"]``) are ``current_job()`` (``.runs``, ``.id``).
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from echomq import App, Retry, current_job

KEEP = 3_600  # arq keeps a result (with the job's tries) an hour: keep_result

# what the session would download (no network in an example), and the status it answers
PAGES = {
    "https://facebook.com": "<html>" + "f" * 120 + "</html>",
    "https://microsoft.com": "<html>" + "m" * 300 + "</html>",
    "https://github.com": "<html>" + "g" * 80 + "</html>",
}


class Session:
    """Stands in for the ``httpx.AsyncClient`` arq's ``startup`` puts in ``ctx``: github
    answers 503 to the first two requests for it."""

    def __init__(self) -> None:
        self.asked: dict[str, int] | None = {}

    async def get(self, url: str) -> tuple[int, str]:
        if self.asked is None:
            raise RuntimeError("the session is closed")
        self.asked[url] = self.asked.get(url, 0) + 1
        if url == "https://github.com" and current_job().failures < 2:
            return 503, ""
        return 200, PAGES[url]

    async def aclose(self) -> None:
        self.asked = None


# arq: async def startup(ctx): ctx["session"] = AsyncClient()
async def startup(ctx: SimpleNamespace) -> None:
    ctx.session = Session()


# arq: async def shutdown(ctx): await ctx["session"].aclose()
async def shutdown(ctx: SimpleNamespace) -> None:
    await ctx.session.aclose()


# finished jobs are kept as long, so app.job(id) still reads their runs (arq's job.info())
app = App(keep_completed_for=dt.timedelta(seconds=KEEP), on_startup=startup,
          on_shutdown=shutdown)

Q = "arq-port"


# arq: max_tries=5 (its default); an async function, as arq's are
@app.task(queue=Q, name="download_content", max_attempts=5, keep_result=KEEP)
async def download_content(url: str) -> int:
    job = current_job()  # arq: the ctx argument
    status, text = await job.context.session.get(url)
    if status != 200:
        # arq: raise Retry(defer=ctx["job_try"] * 5): back-off 5 s, 10 s, ... (here 0.1 s)
        raise Retry(job.runs * 100, error=f"HTTP {status} from {url}")
    return len(text)


@app.task(queue=Q, name="the_task", keep_result=KEEP)
async def the_task(x: int) -> int:
    return x * 2
