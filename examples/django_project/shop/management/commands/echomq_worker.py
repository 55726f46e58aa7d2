"""``python manage.py echomq_worker``: run the shop's tasks with Django set up.

SIGTERM/SIGINT drain in-flight jobs within ``--grace`` seconds, as ``echomq worker`` does.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from echomq import run_worker


class Command(BaseCommand):
    help = "Run the EchoMQ worker for this project's tasks (Django settings loaded)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queues", default=None,
                            help="comma-separated queues (default: every queue of the app)")
        parser.add_argument("--concurrency", type=int, default=10)
        parser.add_argument("--grace", type=float, default=30.0)

    def handle(self, *args: Any, **options: Any) -> None:
        import logging

        from shop.tasks import app

        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        queues = options["queues"].split(",") if options["queues"] else None
        unfinished = run_worker(app, queues, concurrency=options["concurrency"],
                                grace_s=options["grace"])
        app.close()
        if unfinished:
            raise SystemExit(f"{unfinished} jobs left unfinished at exit")
