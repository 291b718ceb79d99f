"""Harvest a Triton run: every cached kernel at every recorded launch, analysed from its cubin.

Identical launches of a kernel (same grid and scalar arguments) are analysed
once and counted in ``calls``.  A kernel with no recorded launch is analysed
for one CTA with no scalar arguments (``launch`` says so); if an address or
branch needs one, that kernel's failure names it and the others go on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from traceconf.errors import InputError
from traceconf.report.notebook import ConflictTable
from traceconf.triton.compile import POINTER_BASE, POINTER_SPACING, capability, scalar_bits
from traceconf.triton.records import CachedKernel, read_cache

#: Scratch pointers Triton appends to every kernel's parameters (global, profile).
SCRATCH_PARAMS = 2


def launch_params(record: dict) -> dict[int, int]:
    """PTX parameter index → value of a recorded launch (pointers get distinct aligned addresses)."""
    params = {}
    for index, param in enumerate(record["params"]):
        kind = str(param.get("type", ""))
        if kind.startswith("*"):
            params[index] = POINTER_BASE + index * POINTER_SPACING
        elif param.get("value") is not None:
            params[index] = scalar_bits(kind, param["value"])
    for scratch in range(len(record["params"]), len(record["params"]) + SCRATCH_PARAMS):
        params[scratch] = 0
    return params


def _label(grid: list[int], params: list[dict]) -> str:
    scalars = ", ".join(f"{p['value']}" for p in params if "value" in p and p["value"] is not None)
    return f"grid {'×'.join(map(str, grid))}" + (f" ({scalars})" if scalars else "")


def tasks(kernels: list[CachedKernel], records: list[dict]) -> list[dict]:
    """One task per kernel and distinct launch."""
    by_hash: dict[str, dict[str, dict]] = {}
    for record in records:
        key = json.dumps([record["grid"], record["params"]], sort_keys=True)
        seen = by_hash.setdefault(record["hash"], {})
        if key in seen:
            seen[key]["calls"] += 1
        else:
            seen[key] = {"record": record, "calls": 1}
    out = []
    for kernel in kernels:
        launches = by_hash.get(kernel.hash)
        if not launches:
            out.append({"kernel": kernel, "grid": [1, 1, 1], "params": {}, "calls": 0,
                        "launch": "one CTA, no launch recorded"})
        for launch in (launches or {}).values():
            record = launch["record"]
            out.append({"kernel": kernel, "grid": record["grid"], "params": launch_params(record),
                        "calls": launch["calls"], "launch": _label(record["grid"], record["params"])})
    return out


def analyze_task(task: dict, device: str) -> tuple[pd.DataFrame, list[str]]:
    """(rows, failure lines) of one kernel at one launch."""
    from traceconf.triton.memo import analysed_launch

    kernel: CachedKernel = task["kernel"]
    block = (32 * kernel.num_warps, 1, 1)
    try:
        frame = analysed_launch(kernel.cubin, kernel.name, block, task["grid"], task["params"],
                                kernel.shared_bytes, device, {}, warn=False)
    except InputError as error:
        return pd.DataFrame(), [f"{error} (kernel {kernel.name}, {task['launch']})"]
    except Exception as error:   # one kernel's failure, whatever it is, never hides the others
        return pd.DataFrame(), [f"{kernel.cubin}: internal error on kernel {kernel.name} ({task['launch']}): "
                                f"{error!r} (a bug: please report)"]
    ptx = kernel.cubin.with_suffix(".ptx")
    if ptx.exists():
        from traceconf.triton.lines import with_python_lines
        frame = with_python_lines(frame, ptx.read_text())
    frame = frame.assign(launch=task["launch"], calls=task["calls"], cache_hash=kernel.hash,
                         triton_version=kernel.triton_version)
    return frame, [f"{line} ({task['launch']})" for line in frame.attrs.get("failures", [])]


def resolve_records(records: list[dict], kernels: list[CachedKernel]) -> tuple[list[dict], list[str]]:
    """(records in record_launches' form, failure lines).  A tritonparse launch names its arguments, and the
    kernel's parameters (from its IR in the cache) say which are the PTX parameters, in order; a launch it
    logged without arguments (inside a CUDA graph capture) cannot be analysed and is a failure line."""
    from traceconf.triton.structured_log import resolved
    by_hash = {kernel.hash: kernel for kernel in kernels}
    parameters: dict[str, list] = {}
    out, failures = [], []
    for record in records:
        if "arguments" not in record:
            out.append(record)
        elif record["hash"] not in by_hash:    # a launch of a kernel this cache lacks (or another GPU's) is no task
            continue
        elif record.get("unrecorded"):
            file, line = record["at"]
            failures.append(f"{file}:{line}: launch of {record['kernel']} not analysed: tritonparse logged no "
                            f"arguments ({record['unrecorded']})")
        else:
            kernel = by_hash[record["hash"]]
            if kernel.hash not in parameters:
                parameters[kernel.hash] = kernel.parameters()
            out.append(resolved(record, parameters[kernel.hash]))
    return out, failures


def harvest_cache(path: Path, records: list[dict], device: str, arch: str, workers: int = 1) -> ConflictTable:
    """Every kernel of the cache compiled for ``arch`` (the device's architecture), at every recorded launch;
    kernels compiled for another architecture are failures (their SASS is another GPU's)."""
    found = read_cache(path)
    if not found:
        raise InputError("no compiled Triton kernels (NAME.cubin with NAME.json) in this folder", file=str(path))
    kernels = [kernel for kernel in found if capability(kernel.arch) == capability(arch)]
    others = [f"{kernel.cubin}: kernel {kernel.name} was compiled for {kernel.arch}, not for {device} "
              f"({arch}): harvest it with --device {kernel.arch}" for kernel in found if kernel not in kernels]
    resolved, unresolvable = resolve_records(records, kernels)
    work = tasks(kernels, resolved)
    if workers > 1 and len(work) > 1:
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(min(workers, len(work))) as pool:
            done = list(pool.map(analyze_task, work, [device] * len(work), chunksize=4))
    else:
        done = [analyze_task(task, device) for task in work]
    frames = [frame for frame, _ in done if len(frame)]
    table = ConflictTable(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame())
    table.attrs["failures"] = others + unresolvable + [line for _, lines in done for line in lines]
    table.attrs["kernels"] = len(kernels)
    table.attrs["launches"] = len(work)
    return table
