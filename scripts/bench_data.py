"""Speed of value tracking (issue 12): the data-free path, and a 1M-element histogram with --data.

1. Data-free path: every launch of tests/fixtures/cuda/kernels.toml, emulated without buffer contents
   (what `analyze` does without --data), timed with this tree and with the baseline tree BASE (default:
   the main branch before issue 12, exported with `git archive` into a temporary directory and run in a
   subprocess), in the same run.  Target: at most 20% slower in total.  The same at the SASS level (the
   fixtures assembled by ptxas, emulated with traceconf.sass; baseline SASS_BASE, default: main before
   --data reached the SASS level), when a ptxas is found.
2. With data: hist256 of tests/fixtures/cuda/datadep.cu on 1,048,576 random bytes (uniform and skewed),
   grid 64 x block 256; every CTA is emulated (the bins depend on the data), at the PTX level and at the
   SASS level.  Target: under 10 s each.

Usage: python scripts/bench_data.py [--baseline REV] [--sass-baseline REV]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CUDA = REPO / "tests" / "fixtures" / "cuda"
DEFAULT_BASELINE = "4a91e10"      # main before issue 12 (data tracking, branch exploration, atomic ops)
SASS_BASELINE = "019d5d1"         # main before --data at the SASS level (global memory, ATOMS values)

TIMER = r'''
import json, re, sys, time, tomllib
from pathlib import Path
import traceconf
assert Path(traceconf.__file__).parent.parent == Path(sys.argv[3]).resolve(), traceconf.__file__
from traceconf.emulate import Launch, emulate
from traceconf.emulate.launch import resolve_launch
from traceconf.ptx import parse_file
if sys.argv[4] == "sass":           # the SASS level: ptxas's code (assembled once, cached), its emulator
    from traceconf.programs.sass import assemble_ptx
    from traceconf.sass.emulate import emulate_sass as emulate
    parse_file = lambda path: assemble_ptx(path, "sm_90")[0]
cuda = Path(sys.argv[1])
launches = tomllib.load(open(cuda / "kernels.toml", "rb"))["launch"]
modules, times = {}, {}
for launch in launches:
    params = {i: (int(p["value"]) if "value" in p else 0x7F0000000000 + i * 2**32) for i, p in
              enumerate(launch["params"])}
    module = modules.setdefault(launch["file"], parse_file(str(cuda / launch["file"].replace(".cu", ".sm_90.ptx"))))
    spec = resolve_launch(Launch(block=tuple(launch["block"]), grid=tuple(launch["grid"]), params=params,
                                 dynamic_smem=launch.get("dynamic_shared_bytes", 0)), module.kernel(launch["kernel"]))
    emulate(module, launch["kernel"], spec)          # warm-up: first-call costs are not the path's speed
    best = None
    for _ in range(int(sys.argv[2])):
        start = time.perf_counter()
        emulate(module, launch["kernel"], spec)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    times[launch["id"]] = best
print(json.dumps(times))
'''


def time_tree(source: Path, repeats: int, level: str) -> dict[str, float]:
    """Best-of-``repeats`` emulation time per launch with the traceconf package under ``source``; run from
    ``source`` (``python -c`` puts the working directory first on sys.path, before any installed copy).  The
    SASS level finds ptxas on PATH and its cache under HOME, as analyze does."""
    env = {"PATH": "/usr/bin:/bin"} if level == "ptx" else \
        {key: os.environ[key] for key in ("PATH", "HOME", "CUDA_HOME", "CUDA_PATH", "TRACECONF_CACHE",
                                          "XDG_CACHE_HOME") if key in os.environ}
    out = subprocess.run([sys.executable, "-c", TIMER, str(CUDA), str(repeats), str(source), level],
                         capture_output=True, text=True, cwd=source, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def data_free(baseline: str, repeats: int, level: str = "ptx") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", baseline, "traceconf", "grammars"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        # alternate the trees, one run each per round, so that machine noise hits both alike
        base, mine = {}, {}
        for _ in range(repeats):
            for times, tree in ((base, Path(tmp)), (mine, REPO)):
                for key, value in time_tree(tree, 1, level).items():
                    times[key] = min(value, times.get(key, value))
    common = sorted(set(base) & set(mine))
    total_base, total_mine = sum(base[k] for k in common), sum(mine[k] for k in common)
    worst = max(common, key=lambda k: mine[k] / base[k])
    print(f"data-free emulation of {len(common)} fixture launches at the {level.upper()} level (best of {repeats} "
          "alternating rounds):")
    print(f"  this tree {total_mine:.3f} s   baseline {baseline} {total_base:.3f} s   "
          f"ratio {total_mine / total_base:.2f} (target <= 1.20)")
    print(f"  slowest relative: {worst} {mine[worst] * 1e3:.1f} ms vs {base[worst] * 1e3:.1f} ms")


def with_data(levels: tuple[str, ...]) -> None:
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.rules import load_rule_set
    from traceconf.pipeline import run_file

    rng = np.random.default_rng(12)
    inputs = {"uniform": rng.integers(0, 256, 1 << 20).astype(np.uint8),
              "skewed": np.minimum(rng.geometric(0.3, 1 << 20), 255).astype(np.uint8)}
    with tempfile.TemporaryDirectory() as tmp:
        for (name, data), level in ((item, level) for item in inputs.items() for level in levels):
            path = Path(tmp) / f"{name}.npy"
            np.save(path, data)
            request = LaunchRequest(block=(256, 1, 1), grid=(64, 1, 1), params={"2": 1 << 20}, data={"0": str(path)})
            if level == "sass":            # assembled once beforehand: ptxas's time is not the emulator's
                run_file(CUDA / "datadep.sm_90.ptx", [re.escape("_Z7hist256PKhPji")],
                         LaunchRequest(block=(256, 1, 1), params={"2": 0}), [load_rule_set("sm_90")], level=level)
            start = time.perf_counter()
            done, failed = run_file(CUDA / "datadep.sm_90.ptx", [re.escape("_Z7hist256PKhPji")], request,
                                    [load_rule_set("sm_90")], level=level)
            elapsed = time.perf_counter() - start
            assert not failed and not done[0].unresolved, failed or done[0].unresolved
            rows = done[0].results.to_pylist()
            atom = sum(r["wavefronts"] for r in rows if r["kind"] == "atom")
            executions = sum(r["executions"] for r in rows if r["kind"] == "atom")
            # baseline in the same run: numpy's own histogram of the same bytes
            start = time.perf_counter()
            np.bincount(data, minlength=256)
            numpy_time = time.perf_counter() - start
            print(f"hist256 1M {name:<8} {level.upper():<4} {elapsed:6.2f} s (target < 10 s)  {executions:,} ATOMS executions, "
                  f"{atom:,} wavefronts   numpy bincount {numpy_time * 1e3:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision of the baseline tree")
    parser.add_argument("--sass-baseline", default=SASS_BASELINE, help="git revision of the SASS level's baseline")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from traceconf import tools
    sass = tools.locate("ptxas") is not None and tools.locate("nvdisasm") is not None
    data_free(args.baseline, args.repeats)
    if sass:
        data_free(args.sass_baseline, args.repeats, "sass")
    else:
        print("SASS level skipped: no ptxas/nvdisasm found")
    with_data(("ptx", "sass") if sass else ("ptx",))


if __name__ == "__main__":
    main()
