"""Per-invocation cost: ``traceconf --version`` against a bare interpreter, and ``analyze`` of the README's
transpose (the edit -> recompile -> analyse loop), with and without compiled ``.pyc`` files.

CPU seconds (user + system) of each child process, medians of ``--repeat`` runs, this tree and a baseline tree
(``--baseline-tree DIR``) in the same run:

* ``python -m traceconf --version`` and ``python3 -c pass``: the ratio is the figure (target <= 1.5x);
* ``traceconf analyze tests/fixtures/emulate/transpose.ptx --block 32,8 --grid 32,32 --suggest`` at the default
  level with a warm ptxas cache (one run first), with the package's ``.pyc`` files (written by that run) and
  without (a copy of the package without ``__pycache__`` and ``PYTHONDONTWRITEBYTECODE``: its modules compiled
  from source every run; the libraries keep theirs); target <= 0.6 CPU-s with ``.pyc``.

Usage: python3 scripts/bench_startup.py [--repeat 5] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRANSPOSE = ["analyze", str(REPO / "tests" / "fixtures" / "emulate" / "transpose.ptx"), "--block", "32,8",
             "--grid", "32,32", "--suggest"]


def cpu(argv: list[str], env: dict) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env,
                   cwd=tempfile.gettempdir())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def median(argv: list[str], env: dict, repeat: int) -> float:
    return statistics.median(cpu(argv, env) for _ in range(repeat))


def measure(tree: Path, repeat: int, scratch: Path) -> dict[str, float]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    cli = [sys.executable, "-m", "traceconf"]
    cpu(cli + TRANSPOSE, env)                    # writes the .pyc files and warms the ptxas cache
    source_only = scratch / "source"
    shutil.copytree(tree / "traceconf", source_only / "traceconf", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(tree / "grammars", source_only / "grammars")
    compiled_each_run = {**env, "PYTHONPATH": str(source_only), "PYTHONDONTWRITEBYTECODE": "1"}
    return {"bare": median([sys.executable, "-c", "pass"], env, repeat),
            "version": median(cli + ["--version"], env, repeat),
            "analyze": median(cli + TRANSPOSE, env, repeat),
            "analyze_no_pyc": median(cli + TRANSPOSE, compiled_each_run, max(1, repeat // 2))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline-tree", type=Path)
    options = parser.parse_args()
    trees = [("this tree", REPO)] + ([("baseline", options.baseline_tree)] if options.baseline_tree else [])
    with tempfile.TemporaryDirectory() as scratch:
        rows = [(name, measure(tree, options.repeat, Path(scratch) / str(i))) for i, (name, tree) in enumerate(trees)]
    print(f"{'':<10} {'python -c pass':>14} {'--version':>10} {'ratio':>6} {'analyze (.pyc)':>15} "
          f"{'analyze (no .pyc)':>18}   CPU seconds, medians of {options.repeat}")
    for name, m in rows:
        print(f"{name:<10} {m['bare']:14.3f} {m['version']:10.3f} {m['version'] / m['bare']:5.2f}x "
              f"{m['analyze']:15.3f} {m['analyze_no_pyc']:18.3f}")


if __name__ == "__main__":
    main()
