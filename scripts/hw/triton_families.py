#!/usr/bin/env python3
"""Triton kernels measured for tests/data/hw/{triton_tut,inductor}: run on the GPU machine under ncu.

    TRITON_CACHE_DIR=RUN/triton_cache python3 scripts/hw/triton_families.py RUN

Compiles and warms up (Inductor's autotuning included) every kernel first, then launches each once between
cudaProfilerStart/Stop (ncu --profile-from-start off measures only those) while a launch hook records, per
launch, the kernel name, cache hash, grid, num_warps, shared bytes, signature, specialisation attributes and
arguments (tensors by dtype/shape/strides, scalars by value) into RUN/launches.json.  The tutorial kernels are those of Triton's
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
                "attrs": [[list(key), value] for key, value in (getattr(src, "attrs", None) or {}).items()],
                "args": [_describe(a) for a in args]})
        return real(grid_0, grid_1, grid_2, stream, function, packed, launch_metadata, enter, exit_, *args)
    return run


CompiledKernel.run = property(_recording_run)

from triton_tutorial_kernels import _layer_norm_fwd_fused, matmul_kernel, softmax_kernel  # noqa: E402


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
