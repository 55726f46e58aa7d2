"""A/B of two checkouts on the hot paths: bench/run.py's drain and release, run alternately
(before, after, before, after, ...) so drift and load hit both alike; medians and ratios.

    python bench/ab.py --before ../old-checkout --after . --rounds 3 --n 10000

Each side runs its own tree's bench/run.py with PYTHONPATH set to that tree, one system and
one scenario at a time, and the per-run figures it prints are collected here.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
from pathlib import Path

KEYS = {"drain": ("rate", "↑ jobs/s"), "release": ("t_to_last_ms", "↓ ms"),
        "release-light": ("p99", "↓ ms"), "enqueue-one": ("rate", "↑ jobs/s"),
        "enqueue-bulk": ("rate", "↑ jobs/s"), "schedule-one": ("rate", "↑ jobs/s"),
        "schedule-bulk": ("rate", "↑ jobs/s")}
# systems that have only some scenarios (bench/run.py's System.scenarios)
ONLY = {"echomq-consumer": ("drain", "release", "release-light"),
        "echomq-consumer-6": ("drain", "release", "release-light"),
        "echomq-4-pipelined": ("drain", "release", "release-light"),
        "echomq-4-sync": ("enqueue-one", "schedule-one")}


def run(tree: Path, system: str, scenario: str, n: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(tree / "bench" / "run.py"), "--systems", system,
                           "--scenarios", scenario, "--n", str(n), "--no-native-vs-script"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        words = line.split(None, 3)
        if len(words) == 4 and words[0] == scenario and words[1] == system and "{" in line:
            return dict(ast.literal_eval(line[line.index("{"):]))
    raise SystemExit(f"{tree}: {system}/{scenario} gave no figures:\n{done.stdout[-2000:]}"
                     f"\n{done.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=Path("."))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--systems", default="echomq-consumer,echomq-consumer-6")
    ap.add_argument("--scenarios", default="drain,release")
    args = ap.parse_args()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    seen: dict[tuple[str, str, str], list[float]] = {}
    for scenario in args.scenarios.split(","):
        key, _ = KEYS[scenario]
        for system in args.systems.split(","):
            if scenario not in ONLY.get(system, (scenario,)):
                continue
            for r in range(args.rounds):
                order = ("before", "after") if r % 2 == 0 else ("after", "before")
                for side in order:
                    got = run(sides[side], system, scenario, args.n)
                    seen.setdefault((scenario, system, side), []).append(got[key])
                    print(f"{scenario:8} {system:18} {side:6} #{r + 1} {key} = {got[key]:.3f}",
                          flush=True)
    print()
    print("| scenario | system | measure | before (median) | after (median) | after/before |")
    print("|---|---|---|---:|---:|---:|")
    for scenario in args.scenarios.split(","):
        key, better = KEYS[scenario]
        for system in args.systems.split(","):
            if (scenario, system, "before") not in seen:
                continue
            b = statistics.median(seen[(scenario, system, "before")])
            a = statistics.median(seen[(scenario, system, "after")])
            print(f"| {scenario} | {system} | {key} {better} | {b:.3f} | {a:.3f} | {a / b:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
