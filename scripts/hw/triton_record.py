#!/usr/bin/env python3
"""A user's run, as docs/triton.md tells them to switch it on, for tests/data/hw/triton_record.

Run on the GPU machine by ``collect_triton_record.sh`` under ``ncu --profile-from-start off``::

    TRITON_CACHE_DIR=... TORCHINDUCTOR_CACHE_DIR=... python3 triton_record.py run RUN
    python3 triton_record.py export REPORT PAGES      # one Source page per profiled launch, and the raw page

``run`` switches on what a user switches on — ``traceconf.triton.record_launches`` (one line) and, where
tritonparse is installed, ``tritonparse.structured_logging.init(..., enable_trace_launch=True)`` — then runs
a small program: Triton's tutorial fused softmax and matmul launched directly, and a ``torch.compile``d
layer_norm → softmax (with a column sum) whose kernels Inductor generates.  Every case runs twice outside
the profiled range (compile, autotune, warm up) and once inside it; ``RUN/cases.json`` names, per case, the
range of launch-record lines its profiled launches wrote.  With no GPU, it stops after switching the
recording on (exit status 3), so everything before that point can be tried anywhere.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def switch_on(run: Path) -> dict:
    """What docs/triton.md asks of a user, done first thing; returns what is recording."""
    import traceconf.triton
    traceconf.triton.record_launches(run / "launches.jsonl")
    recording = {"record_launches": str(run / "launches.jsonl")}
    try:
        import tritonparse.structured_logging
    except ImportError as error:
        recording["tritonparse"] = f"not installed ({error})"
    else:
        try:
            tritonparse.structured_logging.init(str(run / "tritonparse"), enable_trace_launch=True)
            recording["tritonparse"] = str(run / "tritonparse")
        except Exception as error:   # its failure must not lose the record_launches run
            recording["tritonparse"] = f"init failed ({error!r})"
    return recording


def cases():
    """(name, thunk) of each case; inputs are fixed-seed."""
    import torch
    import triton
    sys.path.insert(0, str(HERE))
    from triton_tutorial_kernels import matmul_kernel, softmax_kernel

    gen = torch.Generator(device="cuda").manual_seed(2201)
    x = torch.randn(96, 900, device="cuda", generator=gen)
    y = torch.empty_like(x)
    a = torch.randn(128, 96, device="cuda", generator=gen).half()
    b = torch.randn(96, 192, device="cuda", generator=gen).half()
    c = torch.empty(128, 192, device="cuda", dtype=torch.float16)
    rows = torch.randn(64, 768, device="cuda", generator=gen)
    w, bias = torch.rand(768, device="cuda", generator=gen), torch.rand(768, device="cuda", generator=gen)

    def tutorial_softmax():
        softmax_kernel[(x.shape[0],)](y, x, x.stride(0), y.stride(0), x.shape[1], BLOCK_SIZE=1024, num_warps=4)

    def tutorial_matmul():
        grid = (triton.cdiv(128, 64) * triton.cdiv(192, 64),)
        matmul_kernel[grid](a, b, c, 128, 192, 96, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32,
                            GROUP_SIZE_M=8, num_warps=4, num_stages=3)

    def model(t, weight, shift):
        normed = torch.nn.functional.layer_norm(t, (t.shape[-1],), weight, shift)
        return torch.softmax(normed, -1), normed.sum(0)

    compiled = torch.compile(model, dynamic=False)
    return [("tutorial_softmax", tutorial_softmax), ("tutorial_matmul", tutorial_matmul),
            ("compiled_layer_norm_softmax", lambda: compiled(rows, w, bias))]


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def run(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    recording = switch_on(folder)
    print("recording:", recording, flush=True)
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if not gpu:
        print("no GPU (or no torch): stopping after switching the recording on", flush=True)
        return 3
    import torch._inductor.config as inductor_config
    inductor_config.compile_threads = 1
    inductor_config.use_static_cuda_launcher = False     # docs/triton.md: its launches bypass Triton's launcher
    import triton
    ranges, errors = {}, {}
    ready = []
    for name, thunk in cases():
        try:
            thunk()
            thunk()
            torch.cuda.synchronize()
            ready.append((name, thunk))
        except Exception as error:  # one broken case must not lose the others
            errors[name] = repr(error)
            print("FAILED", name, repr(error), flush=True)
    records = folder / "launches.jsonl"
    torch.cuda.profiler.start()
    for name, thunk in ready:
        first = lines(records)
        thunk()
        torch.cuda.synchronize()
        ranges[name] = [first, lines(records)]
        print("CASE", name, ranges[name], flush=True)
    torch.cuda.profiler.stop()
    versions = {"torch": torch.__version__, "triton": triton.__version__}
    try:
        import tritonparse
        versions["tritonparse"] = getattr(tritonparse, "__version__", "") or _dist_version("tritonparse")
    except ImportError:
        pass
    (folder / "cases.json").write_text(json.dumps({"versions": versions, "recording": recording, "errors": errors,
                                                   "cases": ranges}, indent=1))
    return 0


def _dist_version(name: str) -> str:
    from importlib.metadata import version
    return version(name)


def export(report: Path, pages: Path) -> int:
    """The raw page (kernel names, grids, blocks) and one Source page per profiled launch, in launch order."""
    import csv
    import io
    import subprocess

    sys.path.insert(0, str(HERE))
    from validate_hw import single_table

    def ncu(*args: str) -> str:
        done = subprocess.run(["ncu", "-i", str(report), *args], capture_output=True, text=True)
        return done.stdout if done.returncode == 0 else done.stdout + done.stderr

    pages.mkdir(parents=True, exist_ok=True)
    raw = ncu("--page", "raw", "--csv", "--print-kernel-base", "mangled")
    (pages / "raw.csv").write_text(raw)
    launches = max(0, len(list(csv.reader(io.StringIO(raw)))) - 2)   # a header and a units row
    for index in range(launches):
        page = ncu("--page", "source", "--csv", "--print-source", "sass", "--print-kernel-base", "mangled",
                   "--launch-skip", str(index), "--launch-count", "1")
        (pages / f"{index}.csv").write_text(single_table(page))
    print("exported", launches, "Source pages", flush=True)
    return 0


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        return run(Path(sys.argv[2]))
    if len(sys.argv) == 4 and sys.argv[1] == "export":
        return export(Path(sys.argv[2]), Path(sys.argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
