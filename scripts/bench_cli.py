"""What a newcomer waits for: CLI start-up, and `traceconf parse --format json|table` throughput.

Each figure is printed next to a baseline measured in the same run (the machine is shared and noisy:
CPU seconds of each process, medians of ``--repeat`` runs, ratios):

* start-up of ``traceconf --version``, ``--help`` and ``devices`` against ``python -c "import typer"``
  (the floor: the CLI framework itself) and ``python -c "import traceconf.pipeline"`` (what every command
  paid before heavy modules were imported only where used);
* ``traceconf parse FILE --format json`` and the default table, in lines/s after start-up (the command timed
  inside its process once the CLI and the modules it imports lazily are loaded, minus the same on a 7-line
  file run just before; the median over ``--repeat`` such pairs, with the interquartile range), against
  ``parse_file`` alone measured the same way: the output stages should cost less than the parse itself.

Inputs: the largest corpus file (``../shared/corpus/reduction_kernel.ptx``, when present) and a generated
PTX file of ``--lines`` lines (the corpus kernels replicated under new names, as scripts/bench_parse.py).

Usage: python3 scripts/bench_cli.py [--repeat 5] [--lines 120000] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import os
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


def cpu(argv: list[str]) -> float:
    """CPU time (user + system) of one run of a command, stdout discarded: on a shared machine the wall clock
    mostly measures the other processes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def wall(argv: list[str], repeat: int) -> float:
    """Median CPU time of ``repeat`` runs."""
    return statistics.median(cpu(argv) for _ in range(repeat))


#: One run, timed inside the process once start-up is over: the CLI, the modules its commands import lazily and
#: the grammar are loaded first, then only the command (or ``parse_file``) is timed, in CPU seconds.
TIMED = """
import sys, time
from traceconf.cli import app
import traceconf.commands.parse, traceconf.outputs, traceconf.pipeline, traceconf.ptx, traceconf.traces
import pyarrow as pa, pyarrow.compute
from traceconf.ptx import parse_file
from traceconf.ptx.grammar import ptx_parser
ptx_parser()                 # the grammar's tables, built once per process
pa.array([0])                # pyarrow's first conversion imports pandas
start = time.process_time()
if sys.argv[1] == "parse_file":
    parse_file(sys.argv[2])
else:
    try:
        app(sys.argv[1:])
    except SystemExit:
        pass
sys.stderr.write(f"{time.process_time() - start}\\n")
"""


def timed(argv: list[str], tree: Path = REPO) -> float:
    """CPU seconds of one run's work after start-up (see :data:`TIMED`) with the package of ``tree``; stdout
    discarded."""
    done = subprocess.run([sys.executable, "-c", TIMED, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=True, cwd=tempfile.gettempdir(),
                          env={**os.environ, "PYTHONPATH": str(tree)})
    return float(done.stderr.strip().splitlines()[-1])


def whole_command(argv: list[str], tree: Path, repeat: int) -> float:
    """Median CPU seconds of ``traceconf ARGV`` as a user runs it, with the package of ``tree``."""
    def one() -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "traceconf", *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True, cwd=tempfile.gettempdir(),
                       env={**os.environ, "PYTHONPATH": str(tree)})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return statistics.median(one() for _ in range(repeat))


def after_startup(argv: list[str], path: Path, tiny: Path, repeat: int, tree: Path = REPO
                  ) -> tuple[float, float, float]:
    """(median, first quartile, third quartile) of the CPU time ``argv`` spends on ``path`` after start-up,
    beyond what it spends on ``tiny`` (what every file costs: the grammar's tables, first calls), from runs
    paired one after the other."""
    differences = sorted(timed(argv + [str(path)], tree) - timed(argv + [str(tiny)], tree) for _ in range(repeat))
    quartiles = statistics.quantiles(differences, n=4) if len(differences) > 1 else differences * 3
    return statistics.median(differences), quartiles[0], quartiles[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lines", type=int, default=120_000)
    parser.add_argument("--baseline-tree", type=Path, help="another checkout (git worktree) whose parse command is "
                        "measured in the same run, e.g. the tree before a change")
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
        alone = ["parse_file"]
        print("parse throughput after start-up (lines/s of CPU time, timed inside each process once start-up and "
              "lazy imports are done, a 7-line file's time subtracted; median of pairs, interquartile range)")

        def rate(argv: list[str], path: Path, lines: int, tree: Path = REPO) -> tuple[float, str]:
            median, low, high = after_startup(argv, path, tiny, args.repeat, tree)
            spread = f"[{lines / max(high, 1e-9):,.0f}–{lines / max(low, 1e-9):,.0f}]" if low > 0 else "[noisy]"
            return lines / max(median, 1e-9), spread

        for path in (source, generated):
            lines = path.read_text().count("\n")
            base, spread = rate(alone, path, lines)
            print(f"  {path.name} ({lines:,} lines): parse_file alone {base:,.0f} lines/s {spread}")
            for fmt in ("json", "table"):
                command, command_spread = rate(["parse", "--format", fmt], path, lines)
                print(f"    traceconf parse --format {fmt:5} {command:,.0f} lines/s {command_spread} "
                      f"(×{command / base:.2f} of the parse alone)")
                if args.baseline_tree is not None:
                    old, old_spread = rate(["parse", "--format", fmt], path, lines, args.baseline_tree)
                    print(f"      the same in {args.baseline_tree}: {old:,.0f} lines/s {old_spread} "
                          f"(this tree ×{command / old:.2f})")
                    whole = [whole_command(["parse", "--format", fmt, str(path)], tree, args.repeat)
                             for tree in (REPO, args.baseline_tree)]
                    print(f"      whole command, start-up and exit included: {whole[0]:.3f} CPU-s, "
                          f"{args.baseline_tree} {whole[1]:.3f} CPU-s")

if __name__ == "__main__":
    main()
