"""A FastAPI service that hands slow work to EchoMQ.

Run it::

    pip install echomq fastapi uvicorn
    cd examples/fastapi_app
    echomq worker tasks:app &          # the worker: runs what the API enqueues
    uvicorn main:api                   # the API

    curl -X POST localhost:8000/signup -H 'content-type: application/json' \\
         -d '{"email": "ada@example.com"}'
    curl localhost:8000/jobs/<id>

The lifespan opens the app's asyncio connection when the service starts (so a missing
server fails the start, not the first request) and closes it at shutdown.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

import tasks


@asynccontextmanager
async def lifespan(api: FastAPI) -> AsyncIterator[None]:
    api.state.echomq = tasks.app
    await tasks.app.aconnector()  # connect now: fail at start, not at the first request
    yield
    await tasks.app.aclose()
    tasks.app.close()


api = FastAPI(lifespan=lifespan)


class Signup(BaseModel):
    email: str


@api.post("/signup", status_code=202)
async def signup(body: Signup) -> dict[str, str]:
    job_id = await tasks.send_welcome.aenqueue(body.email)
    # a follow-up, priced on the Valkey server's clock
    await tasks.build_report.aenqueue_in(dt.timedelta(milliseconds=200), 1, "weekly")
    return {"job": job_id}


@api.get("/jobs/{job_id}")
async def job(job_id: str) -> dict[str, object]:
    info = await tasks.app.ajob(job_id)
    if info is None:
        raise HTTPException(404, f"no job {job_id}")
    return {"id": info.id, "state": info.state, "attempts": info.attempts, "task": info.task}
