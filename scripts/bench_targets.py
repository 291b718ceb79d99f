"""The issue-20 launches: CPU seconds at the default level, the work they spend, and whether the answer stays
the same beside busy processes.

Each launch runs ``traceconf analyze ... --format json`` in a child process (CPU seconds of the child, from
``RUSAGE_CHILDREN``; the median of ``--repeat`` runs) with this tree, and once with a baseline tree in the
same run (``--baseline-tree DIR``, e.g. ``git worktree add --detach /tmp/base main``; it is given
``--time-limit 900`` so that its old wall-clock default does not cut it).  For this tree it also prints the
warp steps the launch spent (what ``--work-limit`` counts: the default must cover them) and, with ``--busy N``,
runs the launch again beside N CPU-burning processes and says whether stdout is byte-identical.

Launches (our own kernels of the cuda-samples' shapes, tests/fixtures/emulate/samples.cu, and the corpus's
cuda-samples reduction, ../shared/corpus/reduction_kernel.ptx), at the samples' sizes with random inputs:

* bitonic sort in shared memory, 1,024 CTAs x 512 threads, 1 Mi random keys and values (--data);
* histogram64, 261 CTAs x 64, 1 Mi random words; histogram256, 240 CTAs x 192, 1 Mi random words (4 MiB);
* the convolutionSeparable row pass on a 3072 x 3072 image, 24 x 768 CTAs of 16 x 4 threads, no data
  (tests/fixtures/emulate/convolution.cu);
* reduce0-reduce6 (blockSize 256) over 16 Mi elements, no data: reduce0-2 on 65,536 CTAs, reduce3-5 on
  32,768, reduce6 on 64 (its grid-stride loop does the rest).

``--full`` also runs each launch with every instruction emulated (``TRACECONF_FULL_EMULATION=1``, this tree):
the speed-up of slicing alone (:mod:`traceconf.emulate.slice`) and the share of warp steps it skips; the two
outputs must be identical.

Usage: python3 scripts/bench_targets.py [--repeat 3] [--baseline-tree DIR] [--busy 2] [--full] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "tests" / "fixtures" / "emulate" / "samples.ptx"
CONVOLUTION = REPO / "tests" / "fixtures" / "emulate" / "convolution.ptx"
REDUCTION = REPO.parent / "shared" / "corpus" / "reduction_kernel.ptx"
N = 1 << 24
WORDS = 1 << 20


def _reduce(number: int, grid: int, kernel: str = "") -> list[str]:
    name = kernel or f"_Z17reduce{number}_SMVERSIONIiEvPT_S1_j"
    return [str(REDUCTION), "-k", name, "--block", "256", "--grid", str(grid), "-p", f"2={N}",
            "--dynamic-smem", "1024"]


TARGETS = {
    "bitonic_sort_shared": [str(SAMPLES), "-k", "bitonic_sort_shared", "--block", "512", "--grid", "1024",
                            "--data", f"2=random:uint32:{WORDS}", "--data", f"3=random:uint32:{WORDS}",
                            "-p", "4=1024", "-p", "5=1"],
    "histogram64": [str(SAMPLES), "-k", "histogram64", "--block", "64", "--grid", "261",
                    "--data", f"1=random:uint32:{WORDS}", "-p", f"2={WORDS}"],
    "histogram256": [str(SAMPLES), "-k", "histogram256", "--block", "192", "--grid", "240",
                     "--data", f"1=random:uint32:{WORDS}", "-p", f"2={WORDS}"],
    "convolution_rows": [str(CONVOLUTION), "-k", "convolution_rows", "--block", "16,4", "--grid", "24,768",
                         "-p", "2=3072", "-p", "3=3072", "-p", "4=3072"],
    "reduce0": _reduce(0, N // 256),
    "reduce1": _reduce(1, N // 256),
    "reduce2": _reduce(2, N // 256),
    "reduce3": _reduce(3, N // 512),
    "reduce4": _reduce(4, N // 512, "_Z17reduce4_SMVERSIONIiLj256EEvPT_S1_j"),
    "reduce5": _reduce(5, N // 512, "_Z17reduce5_SMVERSIONIiLj256EEvPT_S1_j"),
    "reduce6": _reduce(6, 64, "_Z17reduce6_SMVERSIONIiLj256ELb1EEvPT_S1_j"),
}

#: The child: the CLI, with the work the emulator spent (launch.Limits.spend) added up and written to stderr.
COUNTING = """
import atexit, sys
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
    env = dict(os.environ, PYTHONPATH=str(tree), TRACECONF_FULL_EMULATION="1" if full else "")
    command = [sys.executable, "-c", COUNTING] if counting else [sys.executable, "-m", "traceconf"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # outside the repository: ``python -m`` puts the working folder first on sys.path
    done = subprocess.run(command + ["analyze", *args, "--format", "json"], capture_output=True, text=True,
                          env=env, cwd=tempfile.gettempdir())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if done.returncode:
        sys.exit(f"{' '.join(args)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return seconds, done.stdout, done.stderr


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline-tree", type=Path)
    parser.add_argument("--busy", type=int, default=0, help="CPU-burning processes beside a last run")
    parser.add_argument("--only", help="comma-separated launch names")
    parser.add_argument("--full", action="store_true", help="also run without the slice (this tree)")
    options = parser.parse_args()
    names = options.only.split(",") if options.only else list(TARGETS)
    print(f"{'launch':<22} {'CPU s':>7} {'baseline':>9} {'speed-up':>8} {'warp steps':>13}  result")
    for name in names:
        args = TARGETS[name]
        runs = [run(args, REPO, counting=True) for _ in range(options.repeat)]
        seconds = statistics.median(r[0] for r in runs)
        outputs = {hashlib.sha256(r[1].encode()).hexdigest() for r in runs}
        work = runs[0][2].rsplit("WORK ", 1)[-1].strip()
        base_text, ratio = "", ""
        if options.baseline_tree:
            base, base_out, _ = run(args + ["--time-limit", "900"], options.baseline_tree, counting=False)
            base_text, ratio = f"{base:9.2f}", f"{base / seconds:7.1f}x"
            same = "same counts as baseline" if _totals(base_out) == _totals(runs[0][1]) else "COUNTS DIFFER"
        else:
            same = ""
        note = f"{partial(runs[0][1])}; {'stable' if len(outputs) == 1 else 'OUTPUT VARIES'}"
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
        print(f"{name:<22} {seconds:7.2f} {base_text:>9} {ratio:>8} {int(work):>13,}  {note}"
              + (f"; {same}" if same else ""), flush=True)


def _totals(stdout: str):
    import json
    return [(r["kernel"], r["device"], r["totals"]) for r in json.loads(stdout)["results"]]


if __name__ == "__main__":
    main()
