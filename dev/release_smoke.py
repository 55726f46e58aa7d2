"""Run one job with an installed echomq, as a team would after `pip install echomq`: run by
dev/release-check.sh in a fresh venv, from a directory outside the repository.

    python release_smoke.py 4    # wire 4 (scripts); the native module may be missing
    python release_smoke.py 6    # wire 6: the native module must be built and loaded
"""

from __future__ import annotations

import asyncio
import pathlib
import sys

import echomq
from echomq import App, Worker, errors, native

wire = int(sys.argv[1])
here = pathlib.Path(echomq.__file__).resolve()
assert "site-packages" in here.parts, f"echomq imported from {here}, not an installed copy"
reason = native.unavailable_reason()
print(f"echomq {echomq.__version__} from {here.parent}")
print("native module:", "built" if reason is None else f"missing ({reason})")
app = App(ephemeral=True, wire=wire)
if wire == 6 and reason is not None:
    try:  # echomq's own refusal: one line naming why there is no module
        app.connector()
    except errors.NativeUnavailable as exc:
        app.close()
        sys.exit(f"NativeUnavailable: {exc}")
    sys.exit("wire 6 connected without the native module")


@app.task(queue="release", keep_result=60)
def add(a: int, b: int) -> int:
    return a + b


job_id = add.enqueue(2, 3)
asyncio.run(Worker(app, burst=True, log_jobs=False).run(asyncio.Event()))
result = app.result(job_id, timeout=30)
app.close()
assert result == 5, result
print(f"wire {wire}: job {job_id} ran, result {result}")
