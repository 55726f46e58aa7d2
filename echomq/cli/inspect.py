"""``echomq inspect``: every job the live workers run now (``echomq workers --busy``).
"""


from typing import Any

from echomq.cli.common import url_flag
from echomq.cli.workers import run_workers


def register(sub: Any) -> None:
    p = sub.add_parser("inspect", help="every job the live workers run now (workers --busy)")
    p.add_argument("--json", action="store_true", help="print JSON")
    url_flag(p)
    p.set_defaults(func=run_workers, busy=True)


