"""``echomq schedule TASK [ARG...] --in 5s|--at ISO``: queue a task run later (the
arguments and the run of ``echomq enqueue``).
"""


from typing import Any

from echomq.cli.enqueue import run_enqueue, task_args
from echomq.core.times import parse_duration, parse_instant


def register(sub: Any) -> None:
    p = sub.add_parser("schedule", help="queue a task run later (--in 5s or --at ISO)")
    task_args(p)
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--in", dest="in_ms", type=parse_duration, help="delay, e.g. 5s, 2m")
    when.add_argument("--at", dest="at_ms", type=parse_instant, help="ISO-8601 or epoch ms")
    p.set_defaults(func=run_enqueue)


