"""The tasks of the FastAPI example: what the endpoints enqueue and ``echomq worker`` runs.

``App()`` reads ``$ECHOMQ_URL``; without it, it uses the embedded server of the data dir
(started on first use, shared by the API process and the worker).
"""

from __future__ import annotations

import datetime as dt

from echomq import App

# completed rows are kept for an hour so GET /jobs/<id> can report "completed"
app = App(keep_completed_for=dt.timedelta(hours=1))


@app.task(queue="emails", name="send_welcome", max_attempts=5)
def send_welcome(address: str) -> None:
    """Stands in for an email provider call (it may fail and be retried)."""
    print(f"welcome email sent to {address}", flush=True)


@app.task(queue="reports", name="build_report")
async def build_report(user_id: int, period: str) -> None:
    print(f"report {period} built for user {user_id}", flush=True)
