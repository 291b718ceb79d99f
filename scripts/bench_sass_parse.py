"""Speed of the SASS level: listing parse, and a full-size launch emulated from ptxas output.

1. Parse: every committed listing (tests/data/hw/sass, tests/data/sass) concatenated
   until the text has about 1M lines, parsed by ``traceconf.sass.listing.parse_text``;
   target >= 200k lines/s.  Baseline in the same run: the Lark grammar
   (grammars/sass.lark) on the instruction lines of one listing, per line.
2. Launch: the 4096^3 tiled matmul (32x32 and 16x16 tiles; tests/fixtures/cuda/matmul.sm_90.ptx)
   assembled with ptxas (cached after the first call, so the timing is "after start-up"),
   disassembled (cached too), emulated at SASS level and analysed for sm_90; target under 1 s.
   Baseline in the same run: the same launch at PTX level.

Run: python scripts/bench_sass_parse.py
"""

from __future__ import annotations

import time
from pathlib import Path

from lark import Lark

from traceconf.sass.listing import parse_text

REPO = Path(__file__).resolve().parents[1]
LISTINGS = sorted((REPO / "tests" / "data" / "hw" / "sass").glob("*.sass")) + \
    sorted((REPO / "tests" / "data" / "sass").glob("*.sass"))


def best_of(repeats: int, action):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return min(times), result


def bench_parse() -> None:
    pieces = [path.read_text() for path in LISTINGS]
    text, lines = "", 0
    while lines < 1_000_000:
        for piece in pieces:
            text += piece
            lines += piece.count("\n")
    seconds, module = best_of(3, lambda: parse_text(text, "bench.sass"))
    print(f"parse: {lines:,} lines ({module.instructions.num_rows:,} instructions, "
          f"{len(text) / 1e6:.0f} MB) in {seconds:.2f} s = {lines / seconds / 1e3:.0f}k lines/s (target >= 200k)")
    grammar = Lark((REPO / "grammars" / "sass.lark").read_text(), parser="lalr", start="line")
    sample = [line.strip() for line in pieces[0].splitlines() if line.strip().startswith("/*") and ";" in line
              and not line.strip().startswith("/* 0x")]
    baseline, _ = best_of(3, lambda: [grammar.parse(line) for line in sample])
    # a listing has ~2 lines per instruction (encoding words): compare per listing line
    per_line = baseline / len(sample) / 2
    print(f"       baseline (Lark per instruction line): {1 / per_line / 1e3:.0f}k lines/s; "
          f"fast path x{per_line * lines / seconds:.0f}")


def bench_launch() -> None:
    from traceconf.emulate import Launch, emulate
    from traceconf.emulate.launch import resolve_launch
    from traceconf.engine import analyze, summarize
    from traceconf.rules import load_rule_set
    from traceconf import tools
    from traceconf.programs.sass import assemble_ptx
    from traceconf.sass.emulate import emulate_sass

    if tools.locate("ptxas") is None or tools.locate("nvdisasm") is None:
        print("launch: skipped (needs ptxas and nvdisasm)")
        return
    rules = load_rule_set("sm_90")
    path = REPO / "tests" / "fixtures" / "cuda" / "matmul.sm_90.ptx"
    assemble_ptx(path, "sm_90")                                       # start-up: ptxas + nvdisasm, then cached
    for tile, kernel in ((32, "_Z12matmul_tiledILi32EEvPKfS1_Pfi"), (16, "_Z12matmul_tiledILi16EEvPKfS1_Pfi")):
        launch = resolve_launch(Launch(block=(tile, tile, 1), grid=(4096 // tile, 4096 // tile, 1), params={"3": 4096}),
                                assemble_ptx(path, "sm_90")[1].kernel(kernel))

        def sass_level():
            module, _ = assemble_ptx(path, "sm_90")
            result = emulate_sass(module, kernel, launch)
            return result, summarize(analyze(result.accesses, rules), scale=result.scale)

        def ptx_level():
            result = emulate(ptx_module, kernel, launch)
            return result, summarize(analyze(result.accesses, rules), scale=result.scale)

        _, ptx_module = assemble_ptx(path, "sm_90")
        sass_seconds, (result, summary) = best_of(3, sass_level)
        ptx_seconds, (ptx_result, ptx_summary) = best_of(3, ptx_level)
        wavefronts = int(sum(summary.column("wavefronts").to_pylist()))
        ptx_wavefronts = int(sum(ptx_summary.column("wavefronts").to_pylist()))
        print(f"launch: matmul {tile}x{tile} 4096^3 at SASS level {sass_seconds:.3f} s (target < 1 s; "
              f"{len(result.accesses):,} warp executions, {wavefronts:,} wavefronts); "
              f"baseline PTX level {ptx_seconds:.3f} s ({ptx_wavefronts:,} wavefronts)")


if __name__ == "__main__":
    bench_parse()
    bench_launch()
