"""``echomq resume QUEUE...``: resume claims on paused queues (waking their idle
workers at once).
"""

from __future__ import annotations

import argparse
from typing import Any

from echomq.cli.common import url_flag
from echomq.cli.known import force_flag
from echomq.cli.pause import pause_or_resume


def register(sub: Any) -> None:
    p = sub.add_parser("resume", help="resume claims on paused queues")
    p.add_argument("queues", nargs="+", metavar="QUEUE")
    force_flag(p)
    url_flag(p)
    p.set_defaults(func=run_resume)


def run_resume(args: argparse.Namespace) -> int:
    return pause_or_resume(args, False)
