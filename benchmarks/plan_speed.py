"""Wall time of `inferstack plan` over the full catalog, interpreter start included.

    python benchmarks/plan_speed.py [--runs 15]

Runs the installed `inferstack` command on every sample workload (all four clouds, every catalog offer),
for the table people read and for --json, and prints the best and median wall time per case. Target
(issue "Sizing"): under 300 ms. Timing depends on the machine and its load, so this prints figures and
does not fail; compare runs on the same machine.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.300


def timings(command: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system) of each run of `command`."""
    walls, cpus = [], []
    for _ in range(runs):
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    executable = shutil.which("inferstack", path=str(Path(sys.executable).parent)) or "inferstack"
    print("| workload | output | wall best | wall median | CPU median | median < 300 ms |")
    print("|---|---|---:|---:|---:|---|")
    for workload in sorted((ROOT / "examples" / "workloads").glob("*.yaml")):
        for label, extra in (("table", []), ("json", ["--json"])):
            walls, cpus = timings([executable, "plan", str(workload), *extra], args.runs)
            median = statistics.median(walls)
            print(f"| {workload.name} | {label} | {min(walls) * 1e3:.0f} ms | {median * 1e3:.0f} ms | "
                  f"{statistics.median(cpus) * 1e3:.0f} ms | {'yes' if median < TARGET_S else 'no'} |")

if __name__ == "__main__":
    main()
