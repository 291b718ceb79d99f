#!/usr/bin/env python3
"""Distributed analyze: throughput on 1 and 2 local Dask workers against one process, in the same run.

Issue #16: a suite of terabytes needs many cores.  This measures, on >= 1 GB of generated Accel-Sim
traces (one kernelslist of many kernel files):

* the single-process run (``traceconf analyze kernelslist.g``: pipeline.run_file), the baseline;
* ``run_many`` on a Dask LocalCluster of 1 and of 2 worker processes (cluster start-up timed apart);
* that all three give identical results;
* peak RSS of a worker process reading one kernel file of 1x and 4x the size (it must stay flat);
* from the measured per-core throughput, the number of cores (and 2-core machines like this one) that
  read a 10 TB suite in an hour.

    python3 scripts/bench_distributed.py [--gb 1.0] [--kernel-mb 64] [--folder DIR] [--source KERNEL.traceg]

The kernel files are the real matrixmul trace of ../shared when present (else the generated sample
kernel), its first CTA repeated with every address moved per CTA (scripts/bench_traces.py's
``big_traceg(distinct=True)``), so that only ALU lines repeat across CTAs as in a real trace.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_traces", REPO / "scripts" / "bench_traces.py")
bench_traces = importlib.util.module_from_spec(_spec)
sys.modules["bench_traces"] = bench_traces
_spec.loader.exec_module(bench_traces)

from traceconf.analyses.results import results_table  # noqa: E402
from traceconf.distributed import run_many  # noqa: E402
from traceconf.distributed.executors import Executor, local_cluster  # noqa: E402
from traceconf.emulate.launch import LaunchRequest
from traceconf.pipeline import run_file  # noqa: E402
from traceconf.rules import load_rule_sets  # noqa: E402

RULES = load_rule_sets(["sm_90"], "sm_90")
KEY = [("kernel", "ascending"), ("device", "ascending"), ("instruction", "ascending")]


def make_suite(folder: Path, total_gb: float, kernel_mb: float) -> tuple[Path, int]:
    """kernelslist.g + copies of one generated kernel file until ``total_gb``; returns (list, bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    first = folder / "kernel-1.traceg"
    if not first.exists() or abs(first.stat().st_size - kernel_mb * 1e6) > 0.2 * kernel_mb * 1e6:
        bench_traces.big_traceg(first, kernel_mb, distinct=True)
    size = first.stat().st_size
    count = max(2, int(round(total_gb * 1e9 / size)))
    names = []
    for k in range(1, count + 1):
        path = folder / f"kernel-{k}.traceg"
        if k > 1 and (not path.exists() or path.stat().st_size != size):
            shutil.copyfile(first, path)
        names.append(path.name)
    for stale in folder.glob("kernel-*.traceg"):
        if stale.name not in names:
            stale.unlink()
    (folder / "kernelslist.g").write_text("\n".join(names) + "\n")
    return folder / "kernelslist.g", size * count


def rss_of_one_kernel(path: Path) -> float:
    """Peak RSS (MB) of a fresh process that runs one unit (what a worker does) on ``path``."""
    code = ("import sys, resource\n"
            "from traceconf.distributed.task import analyze_unit\n"
            "from traceconf.distributed.units import Unit\n"
            "from traceconf.emulate.launch import LaunchRequest\n"
            "from traceconf.rules import load_rule_sets\n"
            "r = analyze_unit(Unit(sys.argv[1], sys.argv[1], 'kernel_file', sys.argv[1], kernel='k'), None,\n"
            "                 LaunchRequest(), load_rule_sets(['sm_90'], 'sm_90'))\n"
            "assert not r.failures, r.failures\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def timed_dask(listing: Path, workers: int):
    start = time.perf_counter()
    with local_cluster(workers) as cluster:
        startup = time.perf_counter() - start
        analyses, failures, summary = run_many([listing], None, LaunchRequest(), RULES,
                                               executor=Executor("dask", scheduler=cluster.scheduler_address))
    assert not failures, failures
    return summary, startup, results_table(analyses, ["sm_90"]).sort_by(KEY)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="total size of the generated trace set")
    parser.add_argument("--kernel-mb", type=float, default=64.0, help="size of one kernel trace file")
    parser.add_argument("--folder", type=Path, help="where to generate (kept; default: a temporary folder)")
    parser.add_argument("--source", type=Path, help="the kernel trace to repeat (default: bench_traces' choice: "
                        "../shared's matrixmul kernel-1.traceg, else the generated sample kernel)")
    args = parser.parse_args()
    if args.source is not None:
        bench_traces.MATRIXMUL = args.source
    temporary = None
    folder = args.folder
    if folder is None:
        temporary = tempfile.TemporaryDirectory(prefix="traceconf-bench-distributed-")
        folder = Path(temporary.name)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; "
          f"source: {bench_traces.source_trace()[0]}")
    start = time.perf_counter()
    listing, total = make_suite(folder, args.gb, args.kernel_mb)
    files = len(listing.read_text().split())
    print(f"trace set: {files} kernel files x {total / files / 1e6:.0f} MB = {total / 1e9:.2f} GB "
          f"(generated in {time.perf_counter() - start:.0f} s)")

    start, cpu = time.perf_counter(), time.process_time()
    analyses, failures = run_file(listing, None, LaunchRequest(), RULES)
    single, single_cpu = time.perf_counter() - start, time.process_time() - cpu
    assert not failures, failures
    baseline = results_table(analyses, ["sm_90"]).sort_by(KEY)
    print(f"single process (baseline)      {single:6.1f} s wall {total / single / 1e6:5.0f} MB/s; "
          f"{single_cpu:6.1f} CPU-s {total / single_cpu / 1e6:5.0f} MB per CPU-s; load {os.getloadavg()[0]:.1f}")

    rows = []
    for workers in (1, 2):
        summary, startup, table = timed_dask(listing, workers)
        rows.append(summary)
        same = "identical" if table.equals(baseline) else "DIFFERENT"
        print(f"Dask LocalCluster, {workers} worker(s) {summary.seconds:6.1f} s wall "
              f"{total / summary.seconds / 1e6:5.0f} MB/s; {summary.cpu_seconds:6.1f} CPU-s "
              f"{total / summary.cpu_seconds / 1e6:5.0f} MB per CPU-s; x{single / summary.seconds:.2f} of one "
              f"process; {summary.cpu_seconds / summary.seconds:.2f} cores busy; load {os.getloadavg()[0]:.1f} "
              f"(cluster start {startup:.1f} s; worker peak RSS {summary.peak_rss / 1e6:.0f} MB; results {same})")
    one, two = rows
    print(f"speed-up 2 workers / 1 worker: x{one.seconds / two.seconds:.2f} wall on this {os.cpu_count()}-core "
          f"machine (2.0 is the ceiling; other jobs share these cores: the workers kept "
          f"{two.cpu_seconds / two.seconds:.2f} of 2 cores busy)")

    small = folder / "rss-small.traceg"
    large = folder / "rss-large.traceg"
    bench_traces.big_traceg(small, args.kernel_mb / 4, distinct=True)
    bench_traces.big_traceg(large, args.kernel_mb, distinct=True)
    rss_small, rss_large = rss_of_one_kernel(small), rss_of_one_kernel(large)
    print(f"worker peak RSS: {rss_small:.0f} MB at {small.stat().st_size / 1e6:.0f} MB of trace, "
          f"{rss_large:.0f} MB at {large.stat().st_size / 1e6:.0f} MB (x{rss_large / rss_small:.2f} for "
          f"x{large.stat().st_size / small.stat().st_size:.1f} the trace)")
    small.unlink()
    large.unlink()

    # per core: bytes per CPU-second of the workers (wall time on a shared machine counts other jobs too)
    per_core = total / two.cpu_seconds
    need = 10e12 / 3600  # 10 TB in an hour
    cores = need / per_core
    print(f"estimate: one core reads {per_core / 1e6:.0f} MB/s of Accel-Sim text (bytes per worker CPU-second, "
          f"2-worker run); 10 TB in an hour needs {need / 1e9:.2f} GB/s = {cores:.0f} cores busy, i.e. "
          f"{cores / 2:.0f} machines like this one (2 cores) or {cores / 64:.1f} 64-core nodes; tasks are "
          f"independent kernel files (no data between workers), so the count grows linearly with the suite "
          f"as long as the shared file system delivers {need / 1e9:.2f} GB/s")
    if temporary is not None:
        temporary.cleanup()


if __name__ == "__main__":
    main()
