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

from traceconf.emulate.launch import LaunchRequest
from traceconf.errors import InputError
from traceconf.pipeline import KernelAnalysis, KernelFailure, run_file, run_trace
from traceconf.programs import DEFAULT_LEVEL
from traceconf.rules import DEFAULT_DEVICE, load_rule_sets

__all__ = ["analyze_ptx", "analyze_sass", "analyze_trace"]

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
                grid: Dims | None = None, params: Mapping[str | int, int] | None = None,
                dynamic_smem: int | None = None, devices: Sequence[str] | str = (DEFAULT_DEVICE,),
                ctas: int | None = None, max_steps: int = 10_000_000, launches: str | Path | None = None,
                level: str = DEFAULT_LEVEL, ptxas_options: Sequence[str] = (), time_limit: float | None = None,
                memory_limit: int | None = None, exhaustive: bool = False,
                data: Mapping[str | int, str] | None = None, seed: int = 0,
                work_limit: int | None = None) -> pd.DataFrame:
    """Emulate the PTX kernels (``kernel`` selects as ``--kernel`` does; all by default) and count wavefronts
    per device: the table ``traceconf analyze FILE -o results.parquet`` writes for the same options.

    ``block`` defaults to the kernel's ``.reqntid``/``.maxntid``; ``params`` maps a parameter name or 0-based
    index to its value; ``data`` maps a pointer parameter (name or index) to its buffer's contents as
    ``--data`` takes them (``FILE.npy``, ``FILE:DTYPE``, ``random:DTYPE:COUNT[:LOW:HIGH]`` drawn with
    ``seed``); ``launches`` is a launch file (docs/launches.md) whose entries fill in what the arguments
    leave out.  ``level="auto"`` (the default, as the CLI's) assembles the PTX with ptxas and counts what the
    GPU runs when a ptxas targets the device, ``"sass"`` insists on that (``docs/sass.md``), ``"ptx"``
    counts the PTX as written.  ``work_limit`` (warp steps of emulated work, default
    ``launch.DEFAULT_WORK_LIMIT``, 0: none), ``memory_limit`` (bytes, default half the machine) and
    ``time_limit`` (wall-clock seconds, off unless given) stop an emulation cleanly; the frame's
    ``attrs["partial"]`` then lists ``kernel: why`` for each stopped kernel.  ``exhaustive`` emulates every CTA where CTA classes would stand for them (to
    check the classes).  A SASS listing or CUDA binary is analysed as :func:`analyze_sass` does.
    """
    launch = LaunchRequest.given_as(block=_dims(block, "block") if block is not None else None,
                                    grid=_dims(grid, "grid") if grid is not None else None,
                                    params={str(k): int(v) for k, v in (params or {}).items()},
                                    dynamic_smem=None if dynamic_smem is None else int(dynamic_smem), ctas=ctas,
                                    max_steps=max_steps, launches=launches, time_limit=time_limit,
                                    memory_limit=memory_limit, classes=not exhaustive, work_limit=work_limit,
                                    data={str(k): str(v) for k, v in (data or {}).items()}, seed=seed)
    launch.retain = 0                  # a frame of counts: no report looks at single executions
    rule_sets = _rules(devices)
    return _frame(*run_file(path, _kernels(kernel), launch, rule_sets, level=level,
                            ptxas_options=list(ptxas_options)), rule_sets)


def analyze_sass(path: str | Path, kernel: str | Iterable[str] | None = None, block: Dims = 32,
                 grid: Dims = (1, 1, 1), params: Mapping[str | int, int] | None = None, dynamic_smem: int = 0,
                 devices: Sequence[str] | str = (DEFAULT_DEVICE,), ctas: int | None = None,
                 max_steps: int = 10_000_000, time_limit: float | None = None, memory_limit: int | None = None,
                 exhaustive: bool = False, data: Mapping[str | int, str] | None = None,
                 seed: int = 0, work_limit: int | None = None) -> pd.DataFrame:
    """Emulate a SASS listing (cuobjdump -sass, nvdisasm) or CUDA binary (cubin, fatbin, executable, .so);
    the arguments are :func:`analyze_ptx`'s."""
    return analyze_ptx(path, kernel, block, grid, params, dynamic_smem, devices, ctas, max_steps,
                       time_limit=time_limit, memory_limit=memory_limit, exhaustive=exhaustive, data=data, seed=seed,
                       work_limit=work_limit)


def analyze_trace(path: str | Path, devices: Sequence[str] | str = (DEFAULT_DEVICE,),
                  kernel: str | Iterable[str] | None = None, skip_bad: bool = False) -> pd.DataFrame:
    """Count wavefronts of a recorded trace (Accel-Sim, NVBit mem_trace, canonical Parquet/CSV) per device."""
    rule_sets = _rules(devices)
    return _frame(*run_trace(path, _kernels(kernel), rule_sets, skip_bad), rule_sets)
