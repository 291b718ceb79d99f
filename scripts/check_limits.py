"""Every kernel of every PTX fixture (and of ../shared/corpus when present) on a huge launch ends cleanly.

Each file runs in its own process with grid 65535×65535×64, every parameter set
to 1024, 48 KiB of dynamic shared memory, the given --time-limit per kernel and
--memory-limit, at the PTX level and (when ptxas and nvdisasm are found) at the
SASS level; a kernel must finish, stop labelled partial, or fail with an
InputError (one line), never with another exception, and the process must not
be killed.  Prints one line per file and level: kernels, outcomes, peak RSS,
wall time.

    python scripts/check_limits.py [--time-limit 5] [--memory-limit 2G] [--levels ptx,sass] [PTX ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time, traceback
from traceconf.errors import InputError
from traceconf.ptx import parse_file
from traceconf.emulate.launch import LaunchRequest
from traceconf.pipeline import analyze_kernel, run_file
from traceconf.programs.ptx import PtxProgram
from traceconf.rules import load_rule_sets
path, time_limit, memory_limit, level = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rules = load_rule_sets(["sm_90"], "sm_90")
out = []
try:
    module = parse_file(path)
except InputError as error:
    print(json.dumps([{"kernel": "", "outcome": "input error", "why": str(error)}])); sys.exit(0)
for name in module.kernel_names():
    row = module.kernel(name)
    if not row.get("entry", True):
        continue
    params = {str(i): 1024 for i in range(len(row.get("params") or []))}
    block = None if row.get("reqntid") else (256, 1, 1)
    request = LaunchRequest(block=block, grid=(65535, 65535, 64), params=params, dynamic_smem=49152,
                            time_limit=time_limit, memory_limit=memory_limit, retain=0)
    started = time.monotonic()
    try:
        if level == "sass":
            # every kernel on its own, so that one kernel's ptxas error does not hide the others' outcomes
            done, failed = run_file(path, [name], request, rules, level="sass")
            if failed and failed[0].internal:
                raise RuntimeError(failed[0].line())
            if failed:
                raise failed[0].error
            analysis = done[0]
        else:
            analysis = analyze_kernel(PtxProgram(module), name, request, rules)
        outcome = "partial" if "partial" in analysis.launch else "done"
        why = analysis.launch.get("partial", "")
    except InputError as error:
        outcome, why = "input error", str(error)[:120]
    except Exception:
        outcome, why = "BUG", traceback.format_exc()[-400:]
    out.append({"kernel": name, "outcome": outcome, "why": why, "seconds": round(time.monotonic() - started, 2)})
print(json.dumps(out))
"""


def size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def check(path: Path, level: str, options) -> bool:
    """One file at one level in its own process; True when something broke."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(options.time_limit),
                                  str(size(options.memory_limit)), level], stdout=out, stderr=subprocess.STDOUT,
                                 env=dict(os.environ, PYTHONPATH=str(REPO)))
        _, status, usage = os.wait4(child.pid, 0)
        out.seek(0)
        text = out.read().decode(errors="replace")
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    try:
        rows = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        rows = [{"kernel": "", "outcome": "BUG", "why": text[-400:]}]
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    slow = max((r.get("seconds", 0) for r in rows), default=0)
    broken = code != 0 or "BUG" in counts or slow > options.time_limit + 30
    print(f"{'FAIL' if broken else 'ok  '} {_shown(path)} [{level}]: {len(rows)} kernel(s) "
          f"{counts}, slowest {slow:.1f} s, peak {usage.ru_maxrss / 1024:.0f} MiB, {seconds:.1f} s"
          + (f", exit {code}" if code else ""), flush=True)
    for row in rows:
        if row["outcome"] == "BUG":
            print("     ", row["kernel"], row["why"])
    return broken


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--memory-limit", default="2G")
    parser.add_argument("--levels", default="ptx,sass")
    parser.add_argument("files", nargs="*", type=Path)
    options = parser.parse_args()
    levels = options.levels.split(",")
    if "sass" in levels:
        from traceconf import tools
        if tools.locate("ptxas") is None or tools.locate("nvdisasm") is None:
            print("no ptxas/nvdisasm: the SASS level is not checked")
            levels.remove("sass")
    files = options.files or sorted((REPO / "tests" / "fixtures").rglob("*.ptx")) + \
        sorted((REPO.parent / "shared" / "corpus").glob("*.ptx"))
    bad = 0
    for path in files:
        for level in levels:
            bad += check(path, level, options)
    print(f"{len(files)} file(s) × {len(levels)} level(s), {bad} failing")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
