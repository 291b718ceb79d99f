"""Speed of PTX emulation + wavefront analysis on full-size launches.

Launches (compiled by nvcc 13.0 for sm_90, tests/fixtures/emulate):
  * 1024x1024 tiled transpose, 32x32 tile, block 32x8, unpadded and padded;
  * 4096^3 tiled matmul, 16x16 and 32x32 tiles.
Each is parsed once, then emulated and analysed with traceconf.engine for
sm_90; the target is under a second per launch.  The baseline ratio is the
time of one numpy pass over the same number of lane addresses (a bank
computation, ``address // 4 % 32``), measured in the same run.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from traceconf.emulate import Launch, emulate
from traceconf.emulate.launch import resolve_launch
from traceconf.engine import analyze, summarize
from traceconf.ptx import parse_file
from traceconf.rules import load_rule_set

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "emulate"

LAUNCHES = [
    ("transpose.ptx", "transpose_unpadded", Launch(block=(32, 8, 1), grid=(32, 32, 1), params={2: 1024, 3: 1024})),
    ("transpose.ptx", "transpose_padded", Launch(block=(32, 8, 1), grid=(32, 32, 1), params={2: 1024, 3: 1024})),
    ("matmul.ptx", "matmul16", Launch(block=(16, 16, 1), grid=(256, 256, 1), params={3: 4096})),
    ("matmul.ptx", "matmul32", Launch(block=(32, 32, 1), grid=(128, 128, 1), params={3: 4096})),
]


def best_of(repeats: int, action):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    rules = load_rule_set("sm_90")
    modules = {}
    print(f"{'kernel':<20} {'emulate s':>10} {'analyze s':>10} {'total s':>8} {'executions':>11} "
          f"{'launch execs/s':>15} {'vs numpy pass':>14}  excess wavefronts")
    for file, kernel, launch in LAUNCHES:
        module = modules.setdefault(file, parse_file(str(FIXTURES / file)))
        emulate_time, result = best_of(3, lambda: emulate(module, kernel, resolve_launch(launch, module.kernel(kernel))))
        analyze_time, summary = best_of(3, lambda: summarize(analyze(result.accesses, rules), scale=result.scale))
        total = emulate_time + analyze_time
        launch_executions = len(result.accesses) * result.scale
        addresses = result.accesses.address
        baseline, _ = best_of(5, lambda: (addresses // 4 % 32).sum())
        excess = int(np.asarray(summary.column("excess_wavefronts")).sum())
        print(f"{kernel:<20} {emulate_time:>10.3f} {analyze_time:>10.3f} {total:>8.3f} {len(result.accesses):>11} "
              f"{launch_executions / total:>15.3g} {total / max(baseline, 1e-9):>13.0f}x  {excess}")


if __name__ == "__main__":
    main()
