"""The issue-20 launches: CPU seconds at the default level, the work they spend, whether the answer stays the
same beside busy processes, and whether it is the H100's.

Each launch runs ``traceconf analyze ... --format json`` in a child process (CPU seconds of the child, from
``RUSAGE_CHILDREN``; the median of ``--repeat`` runs) with this tree, and once with each baseline tree in the
same run (``--baseline-tree DIR``, repeatable, e.g. ``git worktree add --detach /tmp/base 891749c``, the tree
before issue 20; baselines are given ``--time-limit 900`` where they take it, so that the old wall-clock default
does not cut them).  For this tree it also prints the warp steps the launch spent (what ``--work-limit``
counts: the default must cover them), whether the totals equal the H100 Source page's (``exact``: wavefronts
and ideal wavefronts of every LSU shared access summed; tests/test_hw_families.py compares them per SASS pc),
and, with ``--busy N``, runs the launch again beside N CPU-burning processes and says whether stdout is
byte-identical.

The children run as a user's commands do after the first run: in an empty working directory (``python -m`` puts
it first on sys.path; the crowded shared /tmp, listed by the first import, costs ~0.02 CPU-s a command) and with
the package's ``.pyc`` files (``PYTHONDONTWRITEBYTECODE`` is dropped from their environment, and one uncounted
warm-up run of the first launch per tree writes them; otherwise every changed module is compiled from source in
every run, 0.1-0.15 CPU-s).

Launches: the samples20 family (tests/fixtures/samples20/samples20.cu, the cuda-samples kernels, analysed from
the cubin that ran on the H100; tests/data/hw/samples20/manifest.csv gives each launch's grid, block,
parameters, --data inputs and the page's totals), at the samples' sizes with random inputs:

* bitonicSortShared and bitonicMergeShared, 1,024 CTAs x 512 threads, 1 Mi random keys (--data);
* histogram64, 261 CTAs x 64, 1 MiB of random words; histogram256, 240 CTAs x 192, 4 MiB (--data);
* reduce0-reduce5 and cg_reduce over 16 Mi floats (65,536 / 32,768 / 64 CTAs of 256), reduce6 (64 CTAs),
  no data;
* convolutionRowsKernel on a 3072 x 3072 image, 18,432 CTAs of 16 x 4.

``--full`` also runs each launch with every instruction emulated (``TRACECONF_FULL_EMULATION=1``, this tree):
the speed-up of slicing alone (:mod:`traceconf.emulate.slice`) and the share of warp steps it skips; the two
outputs must be identical.

Usage: python3 scripts/bench_targets.py [--repeat 3] [--baseline-tree DIR]... [--busy 2] [--full] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import atexit
import csv
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "samples20"
MANIFEST = REPO / "tests" / "data" / "hw" / "samples20" / "manifest.csv"
#: bench name -> launch id of the manifest
LAUNCHES = {"bitonicSortShared": "bitonic_sort_shared", "bitonicMergeShared": "bitonic_merge_shared",
            "histogram64": "histogram64", "histogram256": "histogram256",
            **{f"reduce{k}": f"reduce{k}_16m" for k in range(6)}, "cg_reduce": "cg_reduce", "reduce6": "reduce6",
            "convolutionRows": "convolution_rows_3072"}


#: The children's working directory: an empty one (see above).
QUIET_CWD = tempfile.mkdtemp(prefix="bench_targets_")
atexit.register(os.rmdir, QUIET_CWD)


def _pairs(text: str) -> list[tuple[str, str]]:
    return [tuple(item.split("=", 1)) for item in text.split(";") if item]


def launch_args(row: dict) -> list[str]:
    """``analyze`` arguments of one manifest row (the cubin, kernel, shape, --param and --data)."""
    args = [str(FIXTURE / "samples20.sm_90.cubin"), "-k", row["kernel"],
            "--grid", row["grid"].replace("x", ","), "--block", row["block"].replace("x", ","),
            "--dynamic-smem", row["dynamic_smem"]]
    for index, value in _pairs(row["params"]):
        args += ["-p", f"{index}={value}"]
    for index, name in _pairs(row["data"]):
        args += ["--data", f"{index}={FIXTURE / name}"]
    return args


def manifest() -> dict[str, dict]:
    return {row["launch"]: row for row in csv.DictReader(open(MANIFEST))}


#: The child: the CLI, with the work the emulator spent (launch.Limits.spend) added up and written to stderr (the
#: set-up the CLI does before numpy is imported done first: the counting imports it).
COUNTING = """
import atexit, sys
from traceconf.startup import one_blas_thread
one_blas_thread()
from traceconf.emulate import launch
spent = [0]
spend = launch.Limits.spend
def counted(self, steps, warps):
    before = self.work
    spend(self, steps, warps)
    spent[0] += self.work - before
launch.Limits.spend = counted
atexit.register(lambda: sys.stderr.write(f"\\nWORK {spent[0]}\\n"))
from traceconf.cli import main
sys.argv = ["traceconf"] + sys.argv[1:]
main()
"""


def run(args: list[str], tree: Path, counting: bool, full: bool = False) -> tuple[float, str, str]:
    """(CPU seconds, stdout, stderr) of one ``analyze`` run with the package of ``tree`` (``full``: every
    instruction emulated, no slice)."""
    if tree != REPO and "--time-limit" in _help(tree):
        args = args + ["--time-limit", "900"]
    env = _environment(tree)
    env["TRACECONF_FULL_EMULATION"] = "1" if full else ""
    command = [sys.executable, "-c", COUNTING] if counting else [sys.executable, "-m", "traceconf"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command + ["analyze", *args, "--format", "json"], capture_output=True, text=True,
                          env=env, cwd=QUIET_CWD)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if done.returncode and tree == REPO:
        sys.exit(f"{' '.join(args)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return seconds, done.stdout if not done.returncode else "", done.stderr


def busy_run(args: list[str], burners: int) -> tuple[float, str, str]:
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
    try:
        return run(args, REPO, False)
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def partial(stdout: str) -> str:
    return "PARTIAL" if '"partial": "' in stdout else "complete"


def _help(tree: Path, cache: dict = {}) -> str:
    if tree not in cache:
        cache[tree] = subprocess.run([sys.executable, "-m", "traceconf", "analyze", "--help"], capture_output=True,
                                     text=True, env=_environment(tree), cwd=QUIET_CWD).stdout
    return cache[tree]


def _environment(tree: Path) -> dict[str, str]:
    """The children's environment: the package of ``tree``, ``.pyc`` files written and used."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline-tree", type=Path, action="append", default=[])
    parser.add_argument("--busy", type=int, default=0, help="CPU-burning processes beside a last run")
    parser.add_argument("--only", help="comma-separated launch names")
    parser.add_argument("--full", action="store_true", help="also run without the slice (this tree)")
    options = parser.parse_args()
    names = options.only.split(",") if options.only else list(LAUNCHES)
    rows = manifest()
    bases = "".join(f" {f'base {i + 1}':>8} {'x':>5}" for i in range(len(options.baseline_tree)))
    for tree in [REPO, *options.baseline_tree]:      # writes the trees' .pyc files, uncounted
        run(launch_args(rows[LAUNCHES[names[0]]]), tree, counting=False)
    print(f"{'launch':<19} {'CPU s':>6}{bases} {'warp steps':>12}  result")
    for name in names:
        row = rows[LAUNCHES[name]]
        args = launch_args(row)
        runs = [run(args, REPO, counting=True) for _ in range(options.repeat)]
        seconds = statistics.median(r[0] for r in runs)
        outputs = {hashlib.sha256(r[1].encode()).hexdigest() for r in runs}
        work = runs[0][2].rsplit("WORK ", 1)[-1].strip()
        note = f"{partial(runs[0][1])}; {'stable' if len(outputs) == 1 else 'OUTPUT VARIES'}; " + \
            _against_page(_totals(runs[0][1]), _page_totals(row))
        columns = ""
        for tree in options.baseline_tree:
            base, base_out, _ = run(args, tree, counting=False)
            if not base_out:
                columns += f" {'failed':>8} {'':>5}"
                continue
            columns += f" {base:8.2f} {base / seconds:4.1f}x"
            if _totals(base_out) != _totals(runs[0][1]):
                note += f"; COUNTS DIFFER from {tree}"
        if options.full:
            full = [run(args, REPO, counting=True, full=True) for _ in range(options.repeat)]
            full_seconds = statistics.median(r[0] for r in full)
            full_work = int(full[0][2].rsplit("WORK ", 1)[-1].strip())
            note += (f"; full emulation {full_seconds:.2f} s ({full_seconds / seconds:.2f}x), {full_work:,} warp steps "
                     f"({1 - int(work) / max(1, full_work):.0%} skipped), output "
                     + ("identical" if full[0][1] == runs[0][1] else "DIFFERENT"))
        if options.busy:
            busy = busy_run(args, options.busy)
            note += f"; beside {options.busy} busy: " + ("identical" if busy[1] == runs[0][1] else "DIFFERENT")
        print(f"{name:<19} {seconds:6.2f}{columns} {int(work):>12,}  {note}", flush=True)


def _totals(stdout: str) -> tuple[int, int]:
    """(wavefronts, ideal wavefronts) of the run, every kind."""
    totals = json.loads(stdout)["results"][0]["totals"].values()
    return sum(kind["wavefronts"] for kind in totals), sum(kind["ideal_wavefronts"] for kind in totals)


def _against_page(predicted: tuple[int, int], page: tuple[int, int]) -> str:
    if predicted == page:
        return "H100 page's totals"
    if predicted[0] == page[0]:
        return f"H100 page's wavefronts; ideal {predicted[1]:,} vs the page's {page[1]:,}"
    return f"NOT THE PAGE'S: {predicted} vs {page}"


def _page_totals(row: dict) -> tuple[int, int]:
    return (sum(int(v) for k, v in row.items() if k.startswith("wf_")),
            sum(int(v) for k, v in row.items() if k.startswith("ideal_")))


if __name__ == "__main__":
    main()
