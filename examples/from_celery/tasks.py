"""A small Celery app ported to EchoMQ: the tasks (``echomq worker tasks:app`` runs them).

The Celery original is in docs/migrating.md, beside this file; ``run.py`` calls these the
way the Celery docs call theirs and prints what the Celery docs say it returns.

``App()`` reads ``$ECHOMQ_URL`` (the broker and the result backend at once); without it, the
embedded server of the data dir.
"""

from __future__ import annotations

from echomq import App, Retry, current_job

app = App()

Q = "celery-port"
HOUR = 3_600  # results kept an hour (Celery's result_expires is a day)


@app.task(queue=Q, name="add", keep_result=HOUR)
def add(x: int, y: int) -> int:
    return x + y


@app.task(queue=Q, name="xsum", keep_result=HOUR)
def xsum(numbers: list[int]) -> int:
    return sum(numbers)


@app.task(queue=Q, name="collect", keep_result=HOUR)
def collect(results: list[int]) -> list[int]:
    """A group's results as one list (Celery's ``group(...)().get()``)."""
    return results


class FailWhaleError(Exception):
    """The upstream is over capacity: worth retrying."""


class LoginError(Exception):
    """Bad credentials: retrying will not help."""


# Celery: @app.task(autoretry_for=(FailWhaleError,), retry_backoff=True, max_retries=5)
@app.task(queue=Q, name="refresh_timeline", retry_on=(FailWhaleError,),
          backoff=("exponential", 100, 1_600), max_attempts=6, keep_result=HOUR)
def refresh_timeline(user: str) -> str:
    job = current_job()
    # Celery: self.request.retries is the failures spent so far: current_job().failures
    if job.failures < 2:  # the upstream is busy for the first two runs
        raise FailWhaleError("fail whale")
    return f"timeline of {user} refreshed after {job.runs} runs"


# Celery: @app.task(bind=True, max_retries=3) ... raise self.retry(exc=exc, countdown=...)
@app.task(queue=Q, name="send_twitter_status", max_attempts=4, keep_result=HOUR)
def send_twitter_status(oauth: str, tweet: str) -> str:
    try:
        if current_job().failures == 0:  # the first try meets a fail whale
            raise FailWhaleError("over capacity")
        if oauth != "token":
            raise LoginError("bad token")
    except (FailWhaleError, LoginError) as exc:
        raise Retry(200, error=exc) from exc  # raise self.retry(exc=exc, countdown=0.2)
    return f"sent {tweet!r} after {current_job().runs} runs"
