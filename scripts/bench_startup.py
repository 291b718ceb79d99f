"""Per-invocation cost: ``traceconf --version`` and ``--help`` against a bare interpreter, ``analyze`` of the
README's transpose (the edit -> recompile -> analyse loop), with and without compiled ``.pyc`` files, and
``parse --format json`` throughput after start-up.

CPU seconds (user + system) of each child process and of the tools it runs, medians of ``--repeat`` runs, this
tree and a baseline tree (``--baseline-tree DIR``) in the same run:

* ``python -m traceconf --version`` and ``python3 -c pass``: the ratio is the figure (target <= 1.5x);
  ``--help`` the same way;
* ``traceconf analyze tests/fixtures/emulate/transpose.ptx --block 32,8 --grid 32,32 --suggest`` at the default
  level with a warm ptxas cache (one run first), with the package's ``.pyc`` files (written by that run) and
  without (a copy of the package without ``__pycache__`` and ``PYTHONDONTWRITEBYTECODE``: its modules compiled
  from source every run; the libraries keep theirs); target <= 0.6 CPU-s with ``.pyc``;
* ``traceconf parse --format json`` of a ``--lines``-line PTX file (the corpus' real kernels replicated under new
  names, as scripts/bench_parse.py; ``reduction.sm_90.ptx`` of the fixtures without the corpus), end to end,
  start-up excluded: lines / (CPU of the command on that file - CPU of the command on a 7-line file); target
  >= 200k lines/s.

``--busy N`` measures everything again beside N CPU-burning processes (CPU seconds should barely move; a 2-core
machine with 2 burners is fully loaded).

Usage: python3 scripts/bench_startup.py [--repeat 5] [--baseline-tree DIR] [--lines 120000] [--busy 2]
"""

from __future__ import annotations

import argparse
import atexit
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from bench_parse import CORPUS, replicate  # noqa: E402

TRANSPOSE = ["analyze", str(REPO / "tests" / "fixtures" / "emulate" / "transpose.ptx"), "--block", "32,8",
             "--grid", "32,32", "--suggest"]
FALLBACK = REPO / "tests" / "fixtures" / "cuda" / "reduction.sm_90.ptx"
TINY = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n"


#: The commands' working directory: an empty one.  ``python -m`` puts it first on sys.path, so a crowded one (a
#: shared /tmp of 20,000 entries) is listed by the first import and adds ~0.02 CPU-s to every command.
QUIET_CWD = tempfile.mkdtemp(prefix="bench_startup_")
atexit.register(os.rmdir, QUIET_CWD)


def cpu(argv: list[str], env: dict) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env, cwd=QUIET_CWD)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def median(argv: list[str], env: dict, repeat: int) -> float:
    return statistics.median(cpu(argv, env) for _ in range(repeat))


def measure(tree: Path, repeat: int, scratch: Path, ptx: Path, tiny: Path) -> dict[str, float]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    cli = [sys.executable, "-m", "traceconf"]
    cpu(cli + TRANSPOSE, env)                    # writes the .pyc files and warms the ptxas cache
    source_only = scratch / "source"
    shutil.copytree(tree / "traceconf", source_only / "traceconf", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(tree / "grammars", source_only / "grammars")
    compiled_each_run = {**env, "PYTHONPATH": str(source_only), "PYTHONDONTWRITEBYTECODE": "1"}
    parse = cli + ["parse", "--format", "json"]
    return {"bare": median([sys.executable, "-c", "pass"], env, repeat),
            "version": median(cli + ["--version"], env, repeat),
            "help": median(cli + ["--help"], env, repeat),
            "analyze": median(cli + TRANSPOSE, env, repeat),
            "analyze_no_pyc": median(cli + TRANSPOSE, compiled_each_run, max(1, repeat // 2)),
            "parse": median(parse + [str(ptx)], env, repeat) - median(parse + [str(tiny)], env, repeat)}


@contextmanager
def burners(count: int):
    """``count`` CPU-burning processes running beside the block."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def table(rows: list[tuple[str, dict]], repeat: int, lines: int, note: str) -> None:
    print(f"{note}: CPU seconds, medians of {repeat}")
    print(f"{'':<10} {'python -c pass':>14} {'--version':>10} {'ratio':>6} {'--help':>7} {'ratio':>6} "
          f"{'analyze (.pyc)':>15} {'analyze (no .pyc)':>18} {'parse json (lines/s)':>21}")
    for name, m in rows:
        print(f"{name:<10} {m['bare']:14.3f} {m['version']:10.3f} {m['version'] / m['bare']:5.2f}x "
              f"{m['help']:7.3f} {m['help'] / m['bare']:5.1f}x {m['analyze']:15.3f} {m['analyze_no_pyc']:18.3f} "
              f"{lines / max(m['parse'], 1e-9):>13,.0f} ({m['parse']:.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline-tree", type=Path)
    parser.add_argument("--lines", type=int, default=120_000)
    parser.add_argument("--busy", type=int, default=0, help="CPU-burning processes beside a second measurement")
    options = parser.parse_args()
    trees = [("this tree", REPO)] + ([("baseline", options.baseline_tree)] if options.baseline_tree else [])
    with tempfile.TemporaryDirectory() as scratch:
        ptx, tiny = Path(scratch) / "generated.ptx", Path(scratch) / "tiny.ptx"
        ptx.write_text(replicate((CORPUS if CORPUS.is_file() else FALLBACK).read_text(), options.lines))
        tiny.write_text(TINY)
        lines = ptx.read_text().count("\n")

        def rows(label: str) -> list[tuple[str, dict]]:
            return [(name, measure(tree, options.repeat, Path(scratch) / f"{label}{i}", ptx, tiny))
                    for i, (name, tree) in enumerate(trees)]

        table(rows("alone"), options.repeat, lines, f"no burners (parse: {lines:,}-line file)")
        if options.busy:
            with burners(options.busy):
                busy = rows("busy")
            table(busy, options.repeat, lines, f"beside {options.busy} CPU-burning processes")


if __name__ == "__main__":
    main()
