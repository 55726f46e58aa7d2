"""Views: enqueue in a request, report a job's state."""

from __future__ import annotations

import json

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from .tasks import app, send_receipt


@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    body = json.loads(request.body or b"{}")
    order_id, email = int(body["order_id"]), str(body["email"])
    # ... save the order ...
    job_id = send_receipt.enqueue(order_id, email)
    return JsonResponse({"order": order_id, "job": job_id}, status=202)


@require_GET
def job_status(request: HttpRequest, job_id: str) -> JsonResponse:
    info = app.job(job_id)
    if info is None:
        return JsonResponse({"error": f"no job {job_id}"}, status=404)
    return JsonResponse({"id": info.id, "state": info.state, "attempts": info.attempts})
