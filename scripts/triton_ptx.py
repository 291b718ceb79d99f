#!/usr/bin/env python3
"""Compile (and launch once) the Triton fixture kernels on an sm_90 GPU.

Triton compiles only for the GPU it runs on, so this runs on the GPU machine
(``scripts/validate_hw.py collect`` runs it under Nsight Compute). For each
kernel it writes to ``--out``:

* ``NAME.ptx``   -- ``compiled.asm["ptx"]``, the PTX the emulator replays;
* ``NAME.ttgir`` -- the TritonGPU IR, to see which layouts went through shared memory;
* ``NAME.json``  -- the launch: grid, num_warps, block = [32 * num_warps, 1, 1],
  shared bytes (``compiled.metadata.shared``: Triton's kernels take all their
  shared memory as dynamic shared memory), and one entry per PTX parameter in
  the format of ``tests/fixtures/cuda/kernels.toml`` (trailing parameters that
  Triton adds itself, e.g. a global scratch pointer, are ``{"scratch": true}``
  and receive a null pointer).

Kernel names start with ``tt_`` so that ncu can select them with a name filter.
``--compile-only`` compiles without launching (to warm Triton's cache before
the profiled run).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import triton
import triton.language as tl


@triton.jit
def _matmul_body(a_ptr, b_ptr, c_ptr, M, N, K,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * K + rk[None, :]
    b = b_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BLOCK_K
        b += BLOCK_K * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def tt_matmul(a_ptr, b_ptr, c_ptr, M, N, K,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """fp16 GEMM with tl.dot, 4 warps: on sm_90 Triton uses warpgroup MMA (wgmma) reading shared memory."""
    _matmul_body(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def tt_matmul_mma2(a_ptr, b_ptr, c_ptr, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The same GEMM with 2 warps: too few for wgmma, so mma.sync fed by ldmatrix."""
    _matmul_body(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def tt_transpose(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
    """y = x^T through a 2-D block: the layout change (row- to column-coalesced) goes through shared memory."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK + tl.arange(0, BLOCK)
    rn = pid_n * BLOCK + tl.arange(0, BLOCK)
    tile = tl.load(x_ptr + rm[:, None] * N + rn[None, :])
    tl.store(y_ptr + rn[:, None] * M + rm[None, :], tl.trans(tile))


@triton.jit
def tt_softmax(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    """Row softmax, one row per program: the max and sum reductions cross warps through shared memory."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


#: The constexprs of each fixture launch (also what tests/test_triton_hw.py compiles on the CPU).
CONSTEXPRS = {"tt_matmul": dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32),
              "tt_matmul_mma2": dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32),
              "tt_transpose": dict(BLOCK=64), "tt_softmax": dict(BLOCK=1024)}
#: Triton's software-pipelining depth in every fixture launch.
NUM_STAGES = 2


def host_random(shape: tuple[int, ...], dtype, seed: int):
    """Random inputs made on the host and copied over, so that no extra kernel runs."""
    import torch
    values = np.random.default_rng(seed).random(int(np.prod(shape))).reshape(shape)
    return torch.from_numpy(values).to(dtype).cuda()


def cases():
    """(name, kernel, grid, num_warps, args as (value, buffer spec | None), constexprs).

    torch is imported here, not at the top: the kernels above are importable without it (the CPU tests
    compile them with traceconf.triton)."""
    import torch
    torch_dtypes = {torch.float16: ("f16", 2), torch.float32: ("f32", 4)}
    n = 256
    a = host_random((n, n), torch.float16, 1)
    b = host_random((n, n), torch.float16, 2)
    x = host_random((n, n), torch.float32, 3)
    s = host_random((64, 1000), torch.float32, 4)

    def buf(t, init: str, seed: int | None = None) -> tuple:
        dtype, size = torch_dtypes[t.dtype]
        spec = {"buffer_bytes": t.numel() * size, "dtype": dtype, "init": init}
        if seed is not None:
            spec["seed"] = seed
        return t, spec

    def out(shape, dtype):
        return buf(torch.empty(shape, dtype=dtype, device="cuda"), "zeros")

    def i32(v: int):
        return v, {"value": v, "type": "s32"}

    return [
        ("tt_matmul", tt_matmul, (n // 64, n // 64, 1), 4,
         [buf(a, "random", 1), buf(b, "random", 2), out((n, n), torch.float32), i32(n), i32(n), i32(n)],
         CONSTEXPRS["tt_matmul"]),
        ("tt_matmul_mma2", tt_matmul_mma2, (n // 64, n // 64, 1), 2,
         [buf(a, "random", 1), buf(b, "random", 2), out((n, n), torch.float32), i32(n), i32(n), i32(n)],
         CONSTEXPRS["tt_matmul_mma2"]),
        ("tt_transpose", tt_transpose, (n // 64, n // 64, 1), 4,
         [buf(x, "random", 3), out((n, n), torch.float32), i32(n), i32(n)], CONSTEXPRS["tt_transpose"]),
        ("tt_softmax", tt_softmax, (64, 1, 1), 4,
         [buf(s, "random", 4), out((64, 1000), torch.float32), i32(1000)], CONSTEXPRS["tt_softmax"]),
    ]


def ptx_params(ptx: str, kernel: str) -> list[str]:
    header = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*\((.*?)\)", ptx, re.S)
    # A declaration reads `.param .u64 .ptr .global .align 1 NAME`: the name is its last word.
    return [decl.split()[-1] for decl in header.group(1).split(",") if decl.strip()] if header else []


def write_outputs(out: Path, name: str, compiled, grid, num_warps: int, specs: list[dict]) -> None:
    import torch
    ptx = compiled.asm["ptx"]
    (out / f"{name}.ptx").write_text(ptx)
    if "ttgir" in compiled.asm:
        (out / f"{name}.ttgir").write_text(compiled.asm["ttgir"])
    names = ptx_params(ptx, compiled.metadata.name)
    params = [dict(spec, ptx_name=names[i]) if i < len(names) else spec for i, spec in enumerate(specs)]
    params += [{"scratch": True, "ptx_name": extra} for extra in names[len(specs):]]
    launch = {
        "id": name, "kernel": compiled.metadata.name, "ptx": f"{name}.ptx",
        "grid": list(grid), "num_warps": num_warps, "block": [32 * num_warps, 1, 1],
        "shared_bytes": compiled.metadata.shared, "params": params,
        "triton_version": triton.__version__, "gpu": torch.cuda.get_device_name(),
    }
    if len(names) < len(specs):
        launch["note"] = "Triton specialised away some arguments; params past the PTX list are not parameters"
    (out / f"{name}.json").write_text(json.dumps(launch, indent=1) + "\n")


def main() -> int:
    import torch
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--order", type=Path, help="write the launch order (JSON) here")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    order = []
    for name, kernel, grid, num_warps, arguments, constexprs in cases():
        values = [value for value, _ in arguments]
        if args.compile_only:
            compiled = kernel.warmup(*values, grid=grid, num_warps=num_warps, num_stages=NUM_STAGES, **constexprs)
        else:
            compiled = kernel[grid](*values, num_warps=num_warps, num_stages=NUM_STAGES, **constexprs)
            torch.cuda.synchronize()
        write_outputs(args.out, name, compiled, grid, num_warps, [spec for _, spec in arguments])
        order.append({"id": name, "kernel": compiled.metadata.name})
        print(f"{name}: {num_warps} warps, {compiled.metadata.shared} B shared", flush=True)
    if args.order:
        args.order.write_text(json.dumps(order, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
