"""What a newcomer waits for: CLI start-up, and `traceconf parse --format json|table` throughput.

Each figure is printed next to a baseline measured in the same run (the machine is shared and noisy:
CPU seconds of each process, medians of ``--repeat`` runs, ratios):

* start-up of ``traceconf --version``, ``--help`` and ``devices`` against ``python -c "import typer"``
  (the floor: the CLI framework itself) and ``python -c "import traceconf.pipeline"`` (what every command
  paid before heavy modules were imported only where used);
* ``traceconf parse FILE --format json`` and the default table, in lines/s after start-up (the command's
  time minus its time on a 7-line file), against ``parse_file`` alone measured the same way: the output
  stages should cost less than the parse itself.

Inputs: the largest corpus file (``../shared/corpus/reduction_kernel.ptx``, when present) and a generated
PTX file of ``--lines`` lines (the corpus kernels replicated under new names, as scripts/bench_parse.py).

Usage: python3 scripts/bench_cli.py [--repeat 5] [--lines 120000]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_parse import CORPUS, replicate  # noqa: E402

FALLBACK = REPO / "tests" / "fixtures" / "cuda" / "reduction.sm_90.ptx"


def wall(argv: list[str], repeat: int) -> float:
    """Median CPU time (user + system) of a command, stdout discarded: on a shared machine the wall clock
    mostly measures the other processes."""
    times = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lines", type=int, default=120_000)
    args = parser.parse_args()
    cli = [sys.executable, "-m", "traceconf"]

    print("start-up (median of", args.repeat, "runs)")
    floor = wall([sys.executable, "-c", "import typer"], args.repeat)
    eager = wall([sys.executable, "-c", "import traceconf.pipeline, traceconf.cli"], args.repeat)
    print(f"  baseline: import typer {floor:.3f} s; import pipeline + cli (eager imports) {eager:.3f} s")
    for argv in (["--version"], ["--help"], ["devices"]):
        seconds = wall(cli + argv, args.repeat)
        print(f"  traceconf {' '.join(argv):10} {seconds:.3f} s   ×{seconds / floor:.2f} of typer's import, "
              f"×{seconds / eager:.2f} of the eager imports")

    source = CORPUS if CORPUS.is_file() else FALLBACK
    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / "generated.ptx"
        generated.write_text(replicate(source.read_text(), args.lines))
        tiny = Path(tmp) / "tiny.ptx"
        tiny.write_text(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n")
        alone = [sys.executable, "-c", "import sys; from traceconf.ptx import parse_file; parse_file(sys.argv[1])"]
        print("parse throughput after start-up (lines/s; each command's time on a 7-line file subtracted)")
        for path in (source, generated):
            lines = path.read_text().count("\n")
            base = lines / (wall(alone + [str(path)], args.repeat) - wall(alone + [str(tiny)], args.repeat))
            print(f"  {path.name} ({lines:,} lines): parse_file alone {base:,.0f} lines/s")
            for fmt in ("json", "table"):
                command = cli + ["parse", "--format", fmt]
                seconds = wall(command + [str(path)], args.repeat) - wall(command + [str(tiny)], args.repeat)
                rate = lines / max(seconds, 1e-9)
                print(f"    traceconf parse --format {fmt:5} {rate:,.0f} lines/s (×{rate / base:.2f} of the parse alone)")

if __name__ == "__main__":
    main()
