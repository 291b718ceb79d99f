#!/usr/bin/env python3
"""Triton kernels measured for tests/data/hw/{triton_tut,inductor}: run on the GPU machine under ncu.

    TRITON_CACHE_DIR=RUN/triton_cache python3 scripts/hw/triton_families.py RUN

Compiles and warms up (Inductor's autotuning included) every kernel first, then launches each once between
cudaProfilerStart/Stop (ncu --profile-from-start off measures only those) while a launch hook records, per
launch, the kernel name, cache hash, grid, num_warps, shared bytes, signature and arguments (tensors by
dtype/shape/strides, scalars by value) into RUN/launches.json.  The tutorial kernels are those of Triton's
tutorials 02 (fused softmax), 05 (layer norm, forward) and 03 (matmul, one fixed config, small shapes); the
Inductor kernels are what torch.compile generates for softmax, layer_norm, transpose+add, row and column
sums, cumsum and argmax.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.compiler.compiler import CompiledKernel

# ------------------------------------------------------------------------------------ launch recording
RECORDS: list[dict] = []
RECORDING = {"family": None}
_run_property = CompiledKernel.run


def _describe(value):
    if isinstance(value, torch.Tensor):
        return {"tensor": str(value.dtype).replace("torch.", ""), "shape": list(value.shape),
                "stride": list(value.stride()), "numel": value.numel()}
    if isinstance(value, (bool, int, float)) or value is None:
        return {"value": value}
    return {"repr": repr(value)}


def _recording_run(self):
    real = _run_property.fget(self)

    def run(grid_0, grid_1, grid_2, stream, function, packed, launch_metadata, enter, exit_, *args):
        if RECORDING["family"]:
            src = getattr(self, "src", None)
            signature = getattr(src, "signature", None)
            RECORDS.append({
                "family": RECORDING["family"], "name": self.name, "hash": self.hash,
                "grid": [grid_0, grid_1, grid_2], "num_warps": self.metadata.num_warps,
                "shared": self.metadata.shared, "num_stages": getattr(self.metadata, "num_stages", None),
                "signature": {k: str(v) for k, v in signature.items()} if isinstance(signature, dict) else None,
                "arg_names": list(getattr(getattr(src, "fn", None), "arg_names", []) or []),
                "args": [_describe(a) for a in args]})
        return real(grid_0, grid_1, grid_2, stream, function, packed, launch_metadata, enter, exit_, *args)
    return run


CompiledKernel.run = property(_recording_run)

# ------------------------------------------------------------------------------------ tutorial kernels


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    row = tl.load(row_start_ptr + col_offsets, mask=col_offsets < n_cols, other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    softmax_output = numerator / tl.sum(numerator, axis=0)
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=col_offsets < n_cols)


@triton.jit
def _layer_norm_fwd_fused(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def tutorial_launches():
    """(name, thunk) of each tutorial launch; the thunks run the kernels on fresh fixed-seed inputs."""
    gen = torch.Generator(device="cuda").manual_seed(22)
    x = torch.randn(128, 1000, device="cuda", generator=gen)
    y = torch.empty_like(x)
    xl = torch.randn(64, 3000, device="cuda", generator=gen)
    w, b = torch.rand(3000, device="cuda", generator=gen), torch.rand(3000, device="cuda", generator=gen)
    yl, mean, rstd = torch.empty_like(xl), torch.empty(64, device="cuda"), torch.empty(64, device="cuda")
    a = torch.randn(256, 192, device="cuda", generator=gen).half()
    bm = torch.randn(192, 320, device="cuda", generator=gen).half()
    c = torch.empty(256, 320, device="cuda", dtype=torch.float16)

    def softmax(num_warps):
        softmax_kernel[(x.shape[0],)](y, x, x.stride(0), y.stride(0), x.shape[1], BLOCK_SIZE=1024,
                                      num_warps=num_warps)

    def layer_norm():
        _layer_norm_fwd_fused[(64,)](xl, yl, w, b, mean, rstd, xl.stride(0), 3000, 1e-5, BLOCK_SIZE=1024,
                                     num_warps=8)

    def matmul(bm_, bn_, bk_, warps, stages):
        grid = (triton.cdiv(256, bm_) * triton.cdiv(320, bn_),)
        matmul_kernel[grid](a, bm, c, 256, 320, 192, a.stride(0), a.stride(1), bm.stride(0), bm.stride(1),
                            c.stride(0), c.stride(1), BLOCK_SIZE_M=bm_, BLOCK_SIZE_N=bn_, BLOCK_SIZE_K=bk_,
                            GROUP_SIZE_M=8, num_warps=warps, num_stages=stages)

    return [("tut_softmax_w4", lambda: softmax(4)), ("tut_softmax_w8", lambda: softmax(8)),
            ("tut_layer_norm", layer_norm), ("tut_matmul_64x64x32", lambda: matmul(64, 64, 32, 4, 3)),
            ("tut_matmul_128x64x64", lambda: matmul(128, 64, 64, 4, 4))]


def inductor_launches():
    gen = torch.Generator(device="cuda").manual_seed(23)
    x = torch.randn(128, 1000, device="cuda", generator=gen)
    sq = torch.randn(512, 512, device="cuda", generator=gen)
    sq2 = torch.randn(512, 512, device="cuda", generator=gen)
    w, b = torch.rand(1000, device="cuda", generator=gen), torch.rand(1000, device="cuda", generator=gen)
    wide = torch.randn(96, 4096, device="cuda", generator=gen)
    cases = {
        "ind_softmax": (lambda t: torch.softmax(t, -1), (x,)),
        "ind_softmax_wide": (lambda t: torch.softmax(t, -1), (wide,)),
        "ind_layer_norm": (lambda t, w_, b_: torch.nn.functional.layer_norm(t, (1000,), w_, b_), (x, w, b)),
        "ind_transpose_add": (lambda s, t: s.t() + t, (sq, sq2)),
        "ind_sum_rows": (lambda t: t.sum(dim=1), (sq,)),
        "ind_sum_cols": (lambda t: t.sum(dim=0), (sq,)),
        "ind_cumsum": (lambda t: torch.cumsum(t, dim=1), (x,)),
        "ind_argmax": (lambda t: torch.argmax(t, dim=1), (x,)),
    }
    launches = []
    for name, (fn, args) in cases.items():
        compiled = torch.compile(fn, dynamic=False)
        launches.append((name, lambda compiled=compiled, args=args: compiled(*args)))
    return launches


def main() -> None:
    run = Path(sys.argv[1])
    run.mkdir(parents=True, exist_ok=True)
    import torch._inductor.config as inductor_config
    inductor_config.compile_threads = 1
    if hasattr(inductor_config, "use_static_cuda_launcher"):
        inductor_config.use_static_cuda_launcher = False
    errors = {}
    launches = []
    for family, make in (("triton_tut", tutorial_launches), ("inductor", inductor_launches)):
        for name, thunk in make():
            try:
                thunk()     # compile, autotune, warm up (outside the profiled range)
                thunk()
                torch.cuda.synchronize()
                launches.append((family, name, thunk))
            except Exception as error:  # one broken case must not lose the others
                errors[name] = repr(error)
                print("FAILED", name, repr(error), flush=True)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for family, name, thunk in launches:
        RECORDING["family"] = family
        first = len(RECORDS)
        thunk()
        torch.cuda.synchronize()
        for record in RECORDS[first:]:
            record["case"] = name
        print("CASE", name, [r["name"] for r in RECORDS[first:]], flush=True)
    RECORDING["family"] = None
    torch.cuda.profiler.stop()
    versions = {"torch": torch.__version__, "triton": triton.__version__}
    (run / "launches.json").write_text(json.dumps({"versions": versions, "errors": errors, "launches": RECORDS},
                                                  indent=1))


if __name__ == "__main__":
    main()
