"""Speed of traceconf.triton: one tutorial kernel against Triton's own compile, and a harvest of 100 kernels.

* ``analyze``: the fused-softmax kernel of Triton's tutorial 02 (and a 4-warp fp16 GEMM,
  scripts/triton_ptx.py's tt_matmul) through ``traceconf.triton.analyze``, against the baseline measured in
  the same run: Triton compiling the same kernel for sm_90 into an empty cache, in a process that has
  compiled before (Triton's start-up, about half a second once per process, is not counted).  Two analyses:

  - *warm*: Triton's cache and traceconf's hold the launch (the compile is a cache hit; the analysis is read
    back, :mod:`traceconf.triton.memo`) — a notebook cell run again, a test suite's next run.
    Target: ≤ 2× the compile.
  - *first*: Triton's cache is warm, the launch was never analysed: disassembly cached, emulation and counting
    are the work.  Target: ≤ 2× the compile too (aim: ≤ 1.6×, so that the noise of a loaded machine does not
    flip it), alone and beside busy processes.

* ``harvest``: 100 kernels (the tutorial softmax, a transpose, a row sum and a scaled copy with different
  block sizes and warp counts) compiled into a fresh cache with one recorded launch each, then
  ``traceconf.triton.harvest`` with 2 worker processes into an empty traceconf cache (every cubin
  disassembled, every launch emulated), then again (all read back).  Target: under a minute on 2 cores.

Times are medians of ``--repeats`` runs in CPU seconds of this process and its children (ptxas, nvdisasm,
worker processes), wall seconds beside them.  ``--burners 2`` repeats the analyze measurements with two
busy processes beside them (CPU seconds should hold; wall seconds grow).  Run:
``python scripts/bench_triton.py [--repeats 5] [--kernels 100] [--burners 2]``.
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


def first_analysis(kernel, grid, args, options):
    """An analysis of a launch traceconf has not analysed yet (its kept analyses set aside)."""
    import shutil

    import traceconf.triton as tt
    from traceconf.sass.toolchain import cache_dir
    shutil.rmtree(cache_dir() / "analyses", ignore_errors=True)
    return tt.analyze(kernel, grid, *args, **options)


def burning(count: int):
    """``count`` processes spinning on a CPU each until the returned function is called."""
    import multiprocessing

    def stop_all() -> None:
        for process in processes:
            process.terminate()
            process.join()
    processes = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(count)]
    for process in processes:
        process.start()
    return stop_all


def _spin() -> None:
    while True:
        pass


def bench_analyze(repeats: int, label: str) -> None:
    import traceconf.triton as tt
    median = statistics.median
    print(f"analyze, {label}: CPU s (wall s), medians of {repeats}")
    print(f"{'kernel':<24} {'compile (baseline)':>19} {'analyze warm':>15} {'ratio':>6}  {'analyze first':>15} "
          f"{'ratio':>6}  wavefronts  excess")
    for name, kernel, grid, args, options in cases():
        cold_compile(kernel, grid, args, options)                  # Triton's start-up, once per process
        compiles = [measured(lambda: cold_compile(kernel, grid, args, options)) for _ in range(repeats)]
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
        table = tt.analyze(kernel, grid, *args, **options)          # warms Triton's cache and the disassembly
        firsts = [measured(lambda: first_analysis(kernel, grid, args, options)) for _ in range(repeats)]
        warms = [measured(lambda: tt.analyze(kernel, grid, *args, **options)) for _ in range(repeats)]
        compile_cpu = median(c for c, _, _ in compiles)

        def cell(runs) -> str:
            return f"{median(c for c, _, _ in runs):.3f} ({median(w for _, w, _ in runs):.2f})"
        warm_cpu, first_cpu = median(c for c, _, _ in warms), median(c for c, _, _ in firsts)
        print(f"{name:<24} {cell(compiles):>19} {cell(warms):>15} {warm_cpu / compile_cpu:>5.2f}x "
              f" {cell(firsts):>15} {first_cpu / compile_cpu:>5.2f}x  "
              f"{int(table.wavefronts.sum()):>10,}  {int(table.excess_wavefronts.sum()):,}")


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


def bench_harvest(count: int, workers: int) -> None:
    import traceconf.triton as tt
    cache = Path(tempfile.mkdtemp())
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    records = cache.parent / f"{cache.name}.jsonl"
    fill_cache(count, records)
    kernels = len(tt.read_cache(cache))
    os.environ["TRACECONF_CACHE"] = tempfile.mkdtemp()         # nothing disassembled or analysed yet
    first = measured(lambda: tt.harvest(cache, records, workers=workers))
    again = measured(lambda: tt.harvest(cache, records, workers=workers))
    table = again[2]
    assert table.equals(first[2]), "a harvest read back equals the one computed"
    print(f"harvest of {kernels} cached kernels ({table.attrs['launches']} launches, {len(table)} rows, "
          f"{len(table.attrs['failures'])} failures), {workers} workers: first {first[0]:.1f} CPU s "
          f"({first[1]:.1f} wall s); again (read back) {again[0]:.1f} CPU s ({again[1]:.1f} wall s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kernels", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--burners", type=int, default=2, help="busy processes beside a second analyze run (0: none)")
    args = parser.parse_args()
    os.environ["TRACECONF_CACHE"] = tempfile.mkdtemp()
    bench_analyze(args.repeats, "alone")
    if args.burners:
        stop = burning(args.burners)
        try:
            bench_analyze(args.repeats, f"{args.burners} CPU burners beside it")
        finally:
            stop()
    if args.kernels:
        bench_harvest(args.kernels, args.workers)


if __name__ == "__main__":
    main()
