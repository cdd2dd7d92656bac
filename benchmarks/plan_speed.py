"""Wall time of `inferstack plan` over the full catalog, interpreter start included.

    python benchmarks/plan_speed.py [--runs 15]

Runs the installed `inferstack` command on every sample workload (all four clouds, every catalog offer),
for the table people read and for --json, and prints the best and median wall time per case. Target
(issue "Sizing"): under 300 ms. Timing depends on the machine and its load, so this prints figures and
does not fail; compare runs on the same machine.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.300


def wall_times(command: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, check=False)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    executable = shutil.which("inferstack", path=str(Path(sys.executable).parent)) or "inferstack"
    print("| workload | output | best | median | target |\n|---|---|---:|---:|---:|")
    for workload in sorted((ROOT / "examples" / "workloads").glob("*.yaml")):
        for label, extra in (("table", []), ("json", ["--json"])):
            times = wall_times([executable, "plan", str(workload), *extra], args.runs)
            best, median = min(times), statistics.median(times)
            verdict = "met" if median < TARGET_S else "MISSED"
            print(f"| {workload.name} | {label} | {best * 1e3:.0f} ms | {median * 1e3:.0f} ms | {verdict} |")


if __name__ == "__main__":
    main()
