"""Module paths from before the layout move, kept one release with a warning.

The package's folders became its layers in 0.2.0 (see CHANGELOG.md). Code that imports an
old path, e.g. ``from echomq.worker import Worker``, still works until 0.3.0: the old module
is a stand-in whose every attribute read warns with a ``DeprecationWarning`` naming the new
path, then reads the moved module. The public verb modules (``echomq.jobs``, ``echomq.errors``,
...) are not in this table: they are the same module objects under their public names
(``echomq/__init__.py``), and their submodules' old paths (``echomq.jobs.claims``) are served
here like any other moved module.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from typing import Any

MOVED: dict[str, str] = {
    "echomq._guards": "echomq.core.guards",
    "echomq._time": "echomq.core.times",
    "echomq.aconnector": "echomq.connectors.aconnector",
    "echomq.app": "echomq.tasks.app",
    "echomq.autopipeline": "echomq.connectors.autopipeline",
    "echomq.backlog": "echomq.verbs.backlog",
    "echomq.beat": "echomq.runtime.beat",
    "echomq.canvas": "echomq.tasks.canvas",
    "echomq.child": "echomq.runtime.child",
    "echomq.claimloop": "echomq.runtime.claimloop",
    "echomq.cluster": "echomq.embedded.cluster",
    "echomq.commands": "echomq.cli",
    "echomq.commands.cluster": "echomq.cli.cluster",
    "echomq.commands.control": "echomq.cli.cancel",
    "echomq.commands.dashboard": "echomq.cli.dashboard",
    "echomq.commands.demo": "echomq.cli.demo",
    "echomq.commands.flowview": "echomq.cli.flowview",
    "echomq.commands.groups": "echomq.cli.group",
    "echomq.commands.jobs": "echomq.cli.enqueue",
    "echomq.commands.repeat": "echomq.cli.repeat",
    "echomq.commands.server": "echomq.cli.server",
    "echomq.commands.worker": "echomq.cli.worker",
    "echomq.connector": "echomq.connectors.connector",
    "echomq.consumer": "echomq.runtime.consumer",
    "echomq.cron": "echomq.core.cron",
    "echomq.dashboard.app": "echomq.dashboard.routes",
    "echomq.datadir": "echomq.embedded.datadir",
    "echomq.declare": "echomq.tasks.declare",
    "echomq.discovery": "echomq.verbs.discovery",
    "echomq.durability": "echomq.verbs.durability",
    "echomq.events": "echomq.runtime.events",
    "echomq.flowcarry": "echomq.verbs.flows.carrying",
    "echomq.flowtree": "echomq.verbs.flows.trees",
    "echomq.handler": "echomq.runtime.handler",
    "echomq.held": "echomq.connectors.kept",
    "echomq.imports": "echomq.runtime.imports",
    "echomq.insight": "echomq.dashboard.insight",
    "echomq.insight.common": "echomq.dashboard.insight.common",
    "echomq.insight.group_pages": "echomq.dashboard.insight.group_pages",
    "echomq.insight.job": "echomq.dashboard.insight.job",
    "echomq.insight.overview": "echomq.dashboard.insight.overview",
    "echomq.insight.pages": "echomq.dashboard.insight.listing",
    "echomq.insight.schedule": "echomq.dashboard.insight.schedule",
    "echomq.isolation": "echomq.runtime.isolation",
    "echomq.launch": "echomq.embedded.launch",
    "echomq.leases": "echomq.runtime.leases",
    "echomq.metrics": "echomq.verbs.metrics",
    "echomq.metronome": "echomq.runtime.metronome",
    "echomq.options": "echomq.core.options",
    "echomq.outcomes": "echomq.core.outcomes",
    "echomq.packing": "echomq.connectors.packing",
    "echomq.partitions": "echomq.core.partitions",
    "echomq.payload": "echomq.core.payload",
    "echomq.plan": "echomq.connectors.plan",
    "echomq.pump": "echomq.runtime.pump",
    "echomq.recorded": "echomq.embedded.recorded",
    "echomq.recurrence": "echomq.core.recurrence",
    "echomq.registry": "echomq.verbs.registry",
    "echomq.replies": "echomq.connectors.replies",
    "echomq.results": "echomq.verbs.results",
    "echomq.retention": "echomq.verbs.retention",
    "echomq.runner": "echomq.runtime.runner",
    "echomq.server": "echomq.embedded.server",
    "echomq.settling": "echomq.runtime.settling",
    "echomq.states": "echomq.core.states",
    "echomq.status": "echomq.verbs.status",
    "echomq.steps": "echomq.core.steps",
    "echomq.task": "echomq.tasks.task",
    "echomq.tracing": "echomq.runtime.tracing",
    "echomq.urls": "echomq.connectors.urls",
    "echomq.worker": "echomq.tasks.worker",}
# names an old module re-exported, or that were renamed since: old module -> name -> "new:attr"
FORMERLY: dict[str, dict[str, str]] = {
    "echomq.app": {"encode": "echomq.core.payload:encode"},
    "echomq.canvas": {"Group": "echomq.tasks.canvas:Fanout"},
    "echomq.commands": {"port": "echomq.cli.common:port"},
    "echomq.commands.groups": {"discover_queues": "echomq.cli.common:scan_queues"},
    "echomq.commands.jobs": {"default_url": "echomq.cli.common:default_url",
                             "discover_queues": "echomq.cli.common:scan_queues"},
    "echomq.connector": {"AsyncConnector": "echomq.connectors.aconnector:AsyncConnector",
                         "Held": "echomq.connectors.kept:KeptConnection",
                         "MAX_COMMAND_BYTES": "echomq.connectors.plan:MAX_COMMAND_BYTES",
                         "NATIVE_MODULE": "echomq.native:MODULE_NAME",
                         "WIRES": "echomq.connectors.plan:WIRES"},
    "echomq.consumer": {"Delay": "echomq.runtime.handler:Delay",
                        "Job": "echomq.runtime.handler:Job",
                        "RateLimited": "echomq.runtime.handler:RateLimited",
                        "current_job": "echomq.runtime.handler:current_job",
                        "Event": "echomq.runtime.events:Event",
                        "Route": "echomq.runtime.route:Route",
                        "ConsumerStats": "echomq.runtime.stats:ConsumerStats",
                        "DEFAULT_LEASE_MS": "echomq.runtime.route:DEFAULT_LEASE_MS",
                        "DEFAULT_MAX_ATTEMPTS": "echomq.runtime.route:DEFAULT_MAX_ATTEMPTS",
                        "DEFAULT_RETRY_DELAY_MS": "echomq.runtime.route:DEFAULT_RETRY_DELAY_MS",
                        "to_epoch_ms": "echomq.core.times:to_epoch_ms",
                        "to_ms": "echomq.core.times:to_ms"},
    "echomq.dashboard.app": {"discover_queues": "echomq.dashboard.routes:queues_to_show"},
    "echomq.held": {"Held": "echomq.connectors.kept:KeptConnection"},
    "echomq.metronome": {"DEFAULT_BATCH": "echomq.runtime.beat:DEFAULT_BATCH",
                         "DEFAULT_BEAT_MS": "echomq.runtime.beat:DEFAULT_BEAT_MS",
                         "LegCounts": "echomq.runtime.beat:LegCounts",
                         "Legs": "echomq.runtime.beat:Legs",
                         "default_owner": "echomq.runtime.beat:default_owner",
                         "promote_once": "echomq.runtime.beat:promote_once",
                         "wake_delay": "echomq.runtime.beat:wake_delay"},
    "echomq.options": {"MAX_PRIORITY": "echomq.core.guards:MAX_PRIORITY"},
    "echomq.plan": {"NATIVE_MODULE": "echomq.native:MODULE_NAME"},
    "echomq.server": {"DURABILITY": "echomq.embedded.launch:DURABILITY",
                      "answers": "echomq.embedded.recorded:answers",
                      "free_port": "echomq.embedded.launch:free_port",
                      "port_in_use": "echomq.embedded.launch:port_in_use",
                      "ServerError": "echomq.embedded.launch:ServerError",
                      "default_data_dir": "echomq.embedded.launch:default_data_dir",
                      "check_durability": "echomq.embedded.launch:check_durability",
                      "server_info": "echomq.embedded.recorded:server_info",
                      "still_running": "echomq.embedded.recorded:still_running",
                      "which_redis_server": "echomq.embedded.launch:which_redis_server"},
    "echomq.settling": {"DEFAULT_LEASE_MS": "echomq.runtime.route:DEFAULT_LEASE_MS",
                        "DEFAULT_MAX_ATTEMPTS": "echomq.runtime.route:DEFAULT_MAX_ATTEMPTS",
                        "DEFAULT_RETRY_DELAY_MS": "echomq.runtime.route:DEFAULT_RETRY_DELAY_MS",
                        "no_handler": "echomq.runtime.route:no_handler"},
    "echomq.task": {"MAX_PRIORITY": "echomq.core.guards:MAX_PRIORITY"},
}

# the public verb packages' submodules keep their old dotted paths the same way
PUBLIC_PACKAGES = {"echomq.jobs": "echomq.verbs.jobs", "echomq.repeat": "echomq.verbs.repeat"}


def new_path(old: str) -> str | None:
    """The module an old path moved to, or ``None`` when ``old`` did not move."""
    if old in MOVED:
        return MOVED[old]
    for before, after in PUBLIC_PACKAGES.items():
        if old.startswith(before + "."):
            return after + old[len(before):]
    return None


class _Moved(types.ModuleType):
    """An old module path: every attribute read warns once per name, then reads the new one."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(old, f"Moved to {new}; this path goes in 0.3.0.")
        self.__moved_to__ = new
        self.__path__: list[str] = []  # so an old subpackage path (echomq.insight.job) resolves

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        new, attr = self.__moved_to__, name
        if name in FORMERLY.get(self.__name__, {}):
            new, attr = FORMERLY[self.__name__][name].split(":")
        warnings.warn(f"{self.__name__}.{name} moved: import {attr} from {new}",
                      DeprecationWarning, stacklevel=2)
        value = getattr(importlib.import_module(new), attr)
        setattr(self, name, value)
        return value


class _Loader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Moved(spec.name, self.new)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths in ``MOVED`` (and under the public packages) and nothing else."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = new_path(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(new))


def install() -> None:
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
