"""Speed of traceconf.triton: one tutorial kernel against Triton's own compile, and a harvest of 100 kernels.

* ``analyze``: the fused-softmax kernel of Triton's tutorial 02 (and a 4-warp fp16 GEMM,
  scripts/triton_ptx.py's tt_matmul) through ``traceconf.triton.analyze`` on a warm Triton cache
  (the compile is a cache hit; disassembly, emulation and counting are the work), against the
  baseline measured in the same run: Triton compiling the same kernel from scratch (an empty cache)
  for sm_90.  Target: analyze ≤ 2× the compile.
* ``harvest``: 100 kernels (the tutorial softmax, a transpose and a scaled copy with different block
  sizes and warp counts) compiled into a fresh cache with one recorded launch each, then
  ``traceconf.triton.harvest`` with 2 worker processes.  Target: under a minute on 2 cores.

The harvest's first run disassembles every cubin (traceconf caches listings by content); later runs
reuse them.  Times are medians of ``--repeats`` runs, CPU seconds of this process and its children (ptxas,
nvdisasm, worker processes) and wall seconds.  Run: ``python scripts/bench_triton.py``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import triton
import triton.language as tl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "tests" / "fixtures" / "triton"))


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    """Triton tutorial 02 (fused softmax), as published."""
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output, mask=mask)


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measured(action) -> tuple[float, float, object]:
    cpu, wall = cpu_seconds(), time.perf_counter()
    result = action()
    return cpu_seconds() - cpu, time.perf_counter() - wall, result


def cases():
    """(name, kernel, grid, args, options) of the analysed launches."""
    import triton_ptx
    n_rows, n_cols = 1823, 781                       # the tutorial's shape
    x = np.random.default_rng(0).random((n_rows, n_cols)).astype(np.float32)
    n = 256
    a = np.random.default_rng(1).random((n, n)).astype(np.float16)
    return [
        ("tutorial softmax", softmax_kernel, (264,), (np.empty_like(x), x, n_cols, n_cols, n_rows, n_cols),
         dict(BLOCK_SIZE=1024, num_stages=4, num_warps=8)),
        ("tt_matmul (fp16 GEMM)", triton_ptx.tt_matmul, (4, 4), (a, a, np.empty((n, n), np.float32), n, n, n),
         dict(num_warps=4, num_stages=2, **triton_ptx.CONSTEXPRS["tt_matmul"])),
    ]


def cold_compile(kernel, grid, args, options) -> None:
    from traceconf.triton.compile import compile_launch
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        compile_launch(kernel, grid, args, options, "sm_90")


def bench_analyze(repeats: int) -> None:
    import traceconf.triton as tt
    print(f"{'kernel':<24} {'Triton compile (cold) cpu/wall s':>33} {'analyze (warm) cpu/wall s':>27} "
          f"{'ratio (cpu)':>11}  wavefronts  excess")
    for name, kernel, grid, args, options in cases():
        compiles = [measured(lambda: cold_compile(kernel, grid, args, options))[:2] for _ in range(repeats)]
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
        table = tt.analyze(kernel, grid, *args, **options)          # warms Triton's and the disassembly cache
        analyses = [measured(lambda: tt.analyze(kernel, grid, *args, **options)) for _ in range(repeats)]
        compile_cpu = statistics.median(c for c, _ in compiles)
        compile_wall = statistics.median(w for _, w in compiles)
        cpu = statistics.median(c for c, _, _ in analyses)
        wall = statistics.median(w for _, w, _ in analyses)
        print(f"{name:<24} {compile_cpu:>20.2f} / {compile_wall:<10.2f} {cpu:>14.2f} / {wall:<10.2f} "
              f"{cpu / compile_cpu:>10.2f}x  {int(table.wavefronts.sum()):>10,}  {int(table.excess_wavefronts.sum()):,}")


def fill_cache(count: int, records: Path) -> None:
    """``count`` distinct kernels compiled into TRITON_CACHE_DIR, one recorded launch each."""
    import json
    from types import SimpleNamespace

    import kernels
    from traceconf.triton.compile import compile_launch
    from traceconf.triton.records import launch_record

    variants = []
    for warps in (1, 2, 4, 8):
        for block in (16, 32, 64):
            x = np.zeros((256, 256), np.float32)
            variants.append((kernels.transpose, (256 // block, 256 // block), (x, x, 256, 256),
                             dict(BLOCK=block, num_warps=warps)))
        for block in (128, 256, 512, 1024, 2048):
            x = np.zeros((64, 1000), np.float32)
            variants.append((softmax_kernel, (64,), (x, x, 1000, 1000, 64, 1000),
                             dict(BLOCK_SIZE=block, num_stages=1, num_warps=warps)))
            variants.append((kernels.row_sum_if_flag, (64,), (x, x, np.ones(1, np.int32), 1000),
                             dict(BLOCK=block, num_warps=warps)))
        for block in (64, 128, 256, 512, 1024, 2048):
            x = np.zeros(100_000, np.float32)
            for stages in (1, 2):
                variants.append((kernels.scaled_copy, (100_000 // block + 1,), (x, x, 100_000, 2.0, 3.0),
                                 dict(BLOCK=block, num_warps=warps, num_stages=stages)))
    lines = []
    for kernel, grid, args, options in variants[:count]:
        compiled = compile_launch(kernel, grid, args, options, "sm_90")
        fake = SimpleNamespace(src=SimpleNamespace(signature=compiled.signature),
                               metadata=SimpleNamespace(hash=compiled.hash, name=compiled.name,
                                                        num_warps=compiled.num_warps))
        lines.append(json.dumps(launch_record(fake, grid, args)))
    records.write_text("\n".join(lines) + "\n")


def bench_harvest(count: int, workers: int, repeats: int) -> None:
    import traceconf.triton as tt
    cache = Path(tempfile.mkdtemp())
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    records = cache.parent / f"{cache.name}.jsonl"
    fill_cache(count, records)
    kernels = len(tt.read_cache(cache))
    os.environ["TRACECONF_CACHE"] = tempfile.mkdtemp()         # no listing of these cubins cached yet
    runs = [measured(lambda: tt.harvest(cache, records, workers=workers)) for _ in range(repeats)]
    table = runs[-1][2]
    print(f"harvest of {kernels} cached kernels ({table.attrs['launches']} launches), {workers} workers: first run "
          f"(disassembly not yet cached) {runs[0][0]:.1f} CPU s, {runs[0][1]:.1f} wall s; then median "
          f"{statistics.median(c for c, _, _ in runs[1:] or runs):.1f} CPU s, "
          f"{statistics.median(w for _, w, _ in runs[1:] or runs):.1f} wall s; {len(table)} rows, "
          f"{len(table.attrs['failures'])} failures")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kernels", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    bench_analyze(args.repeats)
    bench_harvest(args.kernels, args.workers, args.repeats)


if __name__ == "__main__":
    main()
