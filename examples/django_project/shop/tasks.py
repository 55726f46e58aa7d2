"""The shop's background tasks. One ``App`` per project, configured from Django's settings.

Run them with ``python manage.py echomq_worker`` (Django is set up first, so handlers can use
the ORM and settings), or ``DJANGO_SETTINGS_MODULE=mysite.settings echomq worker
shop.tasks:app`` when they need neither.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings

from echomq import App

app = App(
    settings.ECHOMQ_URL,
    keep_completed_for=dt.timedelta(seconds=settings.ECHOMQ_KEEP_COMPLETED_S),
)


@app.task(queue="receipts", name="shop.send_receipt", max_attempts=5)
def send_receipt(order_id: int, email: str) -> None:
    """Stands in for rendering and mailing a receipt (``settings`` is usable here)."""
    print(f"receipt for order {order_id} sent to {email} (debug={settings.DEBUG})", flush=True)
