"""The Python API: one pandas DataFrame of per-instruction results.

>>> import traceconf
>>> df = traceconf.analyze_ptx("transpose.ptx", kernel="transpose_unpadded", block=(32, 8), grid=(32, 32))
>>> df.sort_values("excess_wavefronts", ascending=False).head()

The columns are those of :data:`traceconf.schemas.RESULT_ROWS` (the same
table ``traceconf analyze -o results.parquet`` writes): ``input, kernel,
device, instruction, kind, width_bits, text, ptx_line, pc, source_file,
source_line, source, executions, wavefronts, ideal_wavefronts,
excess_wavefronts, max_ways, resolved, unresolved_reason`` — one row per
kernel × device × shared-memory instruction.  Kernels that fail are listed in
``df.attrs["failures"]`` (``"FILE:LINE:COL: kernel K: message"``) and warned
about; the others' rows are kept.  Bad input (unreadable file, unknown device,
every kernel failing) raises :class:`traceconf.InputError`.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from traceconf.errors import InputError
from traceconf.pipeline import KernelAnalysis, KernelFailure, LaunchRequest, run_ptx, run_trace
from traceconf.rules import load_rule_sets

__all__ = ["analyze_ptx", "analyze_trace"]

Dims = int | Sequence[int]


def _dims(value: Dims, name: str) -> tuple[int, int, int]:
    dims = [int(value)] if isinstance(value, int) else [int(v) for v in value]
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise InputError(f"{name} must be 1 to 3 positive integers, got {value!r}")
    return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]


def _kernels(kernel: str | Iterable[str] | None) -> list[str] | None:
    if kernel is None:
        return None
    return [kernel] if isinstance(kernel, str) else list(kernel)


def _rules(devices: Sequence[str] | str) -> list:
    return load_rule_sets([devices] if isinstance(devices, str) else list(devices))


def _frame(analyses: list[KernelAnalysis], failures: list[KernelFailure], rule_sets: list) -> pd.DataFrame:
    from traceconf.analyses.results import results_table

    if failures and not analyses:
        raise failures[0].error
    frame = results_table(analyses, [r.name for r in rule_sets]).to_pandas()
    messages = [failure.line() for failure in failures]
    frame.attrs["failures"] = messages
    frame.attrs["partial"] = [f"{a.kernel}: {a.launch['partial']}" for a in analyses if "partial" in a.launch]
    for message in messages:
        warnings.warn(message, stacklevel=3)
    return frame


def analyze_ptx(path: str | Path, kernel: str | Iterable[str] | None = None, block: Dims | None = None,
                grid: Dims = (1, 1, 1), params: Mapping[str | int, int] | None = None, dynamic_smem: int = 0,
                devices: Sequence[str] | str = ("sm_90",), ctas: int | None = None,
                max_steps: int = 10_000_000, time_limit: float | None = None,
                memory_limit: int | None = None) -> pd.DataFrame:
    """Emulate the PTX kernels (name or regex ``kernel``; all by default) and count wavefronts per device.

    ``block`` defaults to the kernel's ``.reqntid``; ``params`` maps a parameter
    name or 0-based index to its value.  ``time_limit`` (seconds, default 30) and
    ``memory_limit`` (bytes, default half the machine) stop an emulation cleanly; the
    frame's ``attrs["partial"]`` then lists ``kernel: why`` for each stopped kernel.
    """
    launch = LaunchRequest(block=_dims(block, "block") if block is not None else None, grid=_dims(grid, "grid"),
                           params={str(k): int(v) for k, v in (params or {}).items()},
                           dynamic_smem=int(dynamic_smem), ctas=ctas, max_steps=max_steps,
                           time_limit=time_limit, memory_limit=memory_limit, retain=0)
    rule_sets = _rules(devices)
    return _frame(*run_ptx(path, _kernels(kernel), launch, rule_sets), rule_sets)


def analyze_trace(path: str | Path, devices: Sequence[str] | str = ("sm_90",),
                  kernel: str | Iterable[str] | None = None, skip_bad: bool = False) -> pd.DataFrame:
    """Count wavefronts of a recorded trace (Accel-Sim, NVBit mem_trace, canonical Parquet/CSV) per device."""
    rule_sets = _rules(devices)
    return _frame(*run_trace(path, _kernels(kernel), rule_sets, skip_bad), rule_sets)
