"""Triton kernels from Python, without a GPU: one launch (:func:`analyze`) or a whole run (:func:`harvest`).

>>> import traceconf.triton
>>> traceconf.triton.analyze(softmax_kernel, (n_rows,), y, x, x.stride(0), y.stride(0), n_cols,
...                          BLOCK_SIZE=1024, num_warps=4)

The call mirrors ``softmax_kernel[(n_rows,)](y, x, ..., BLOCK_SIZE=1024, num_warps=4)``.  The installed
Triton compiles the kernel for the rule set's architecture (``device="sm_90"``) exactly as its launcher
would (:mod:`traceconf.triton.compile`), and the cubin it builds — the code the GPU runs — is analysed at
SASS level with block ``num_warps × 32``, the kernel's shared memory (all of it dynamic, from the compiled
metadata), the scalar arguments as parameters and the arrays' contents as buffer data.  The result is the
table of :func:`traceconf.analyze_ptx` (its ``source_file``/``source_line`` are the Python lines of the
kernel) as a :class:`~traceconf.report.notebook.ConflictTable` with the launch facts, Triton version
included, in ``attrs["launch"]``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from traceconf.report.notebook import ConflictTable, SvgPicture
from traceconf.triton.compile import CompiledLaunch, compile_launch
from traceconf.triton.records import cache_dir, read_cache, read_launches, record_launches
from traceconf.rules import DEFAULT_DEVICE

__all__ = ["analyze", "harvest", "launch", "TritonLaunch", "record_launches", "read_cache", "cache_dir"]


@dataclass
class TritonLaunch:
    """``fn[grid](*args, **options)`` written down: what :func:`analyze` and the pytest plugin take."""

    grid: object
    args: tuple
    options: dict = field(default_factory=dict)


def launch(grid, *args, num_warps: int = 4, num_stages: int = 3, **constexprs) -> TritonLaunch:
    """The launch ``fn[grid](*args, num_warps=..., **constexprs)``, for :func:`traceconf.pytest_plugin`."""
    return TritonLaunch(grid, args, dict(num_warps=num_warps, num_stages=num_stages, **constexprs))


def _arch(device: str) -> str:
    from traceconf.errors import InputError
    from traceconf.rules import load_rule_sets

    (rules,) = load_rule_sets([device])
    arch = rules.arch
    if arch is None:
        raise InputError(f"device {device}: Triton kernels are analysed on NVIDIA architectures (sm_80, sm_90 ...)")
    return arch


def analyze(fn, grid, *args, num_warps: int = 4, num_stages: int = 3, device: str = DEFAULT_DEVICE,
            **constexprs) -> ConflictTable:
    """Bank conflicts of ``fn[grid](*args, num_warps=..., num_stages=..., **constexprs)`` on ``device``."""
    compiled = compile_launch(fn, grid, args, dict(num_warps=num_warps, num_stages=num_stages, **constexprs),
                              _arch(device))
    return analyze_compiled(compiled, device)


def analyze_compiled(compiled: CompiledLaunch, device: str) -> ConflictTable:
    """The SASS analysis of one compiled launch, with its explain pictures on demand.

    The arrays' contents are used only when something depends on them: a first analysis runs without
    them, and only if it leaves accesses unresolved is it run again with the buffers as data.  (With
    data, loaded values are computed and what one CTA stores may change what another loads, so every
    CTA is emulated: much slower, for the same counts where no address or branch reads memory.)
    """
    import dataclasses

    from traceconf.kinds import UNCOUNTED

    without = dataclasses.replace(compiled, data={})
    frame = _analyse_sass(without, device)
    unresolved = set(frame.loc[~frame["resolved"].astype(bool), "unresolved_reason"].dropna()) if len(frame) else set()
    if compiled.data and unresolved - set(UNCOUNTED.values()):
        return _table(_analyse_sass(compiled, device), compiled, device)
    return _table(frame, without, device)


def _analyse_sass(compiled: CompiledLaunch, device: str) -> pd.DataFrame:
    """The SASS analysis of the launch, kept by content (:mod:`traceconf.triton.memo`)."""
    from traceconf.triton.memo import analysed_launch

    return analysed_launch(compiled.cubin, compiled.name, compiled.block, compiled.grid, compiled.params,
                           compiled.shared_bytes, device, compiled.data)


def _table(frame: pd.DataFrame, compiled: CompiledLaunch, device: str) -> ConflictTable:
    from traceconf.triton.lines import with_python_lines
    frame = with_python_lines(frame, compiled.ptx)
    if compiled.source_file:
        # Triton's cache key holds the source text and its line numbers, not its path: a kernel compiled from
        # the same file in another folder (a copy, a checkout) comes back naming that folder
        name = Path(compiled.source_file).name
        stale = frame["source_file"].map(lambda file: isinstance(file, str) and file != compiled.source_file
                                         and Path(file).name == name)
        if stale.any():
            frame.loc[stale, "source_file"] = compiled.source_file
            frame.loc[stale, "source"] = frame.loc[stale].apply(lambda row: f"{row.source_file}:{row.source_line}",
                                                                axis=1)
    table = ConflictTable(frame)
    table.attrs.update(frame.attrs)
    table.attrs["launch"] = compiled.facts()
    if compiled.source_file:
        table["input"] = compiled.source_file
    table.explainer = lambda instruction=None: explain_compiled(compiled, device, instruction)
    return table


def explain_compiled(compiled: CompiledLaunch, device: str, instruction: int | None = None) -> SvgPicture:
    """The explain picture of one instruction (default: the one with the most excess wavefronts)."""
    from traceconf.pictures import explain_svg
    from traceconf.triton.memo import launch_files

    with tempfile.TemporaryDirectory(prefix="traceconf-triton-") as work:
        cubin, data = launch_files(Path(work), compiled.cubin, compiled.name, compiled.data)
        row, svg = explain_svg(cubin, compiled.name, device, instruction=instruction, block=compiled.block,
                               grid=compiled.grid, params=compiled.params, dynamic_smem=compiled.shared_bytes,
                               data=data)
    from traceconf.triton.lines import python_lines, triton_library
    line = python_lines(compiled.ptx, triton_library()).get(row["ptx_line"] or 0)
    return SvgPicture(svg, f"{compiled.name}: {':'.join(map(str, line)) if line else row['source']} {row['text']}")


def harvest(path: str | Path | None = None, launches: str | Path | None = None, device: str = DEFAULT_DEVICE,
            workers: int = 1) -> ConflictTable:
    """Every kernel of a Triton cache (``path``, else ``TRITON_CACHE_DIR``, else ``~/.triton/cache``) at every
    recorded launch (``launches``: :func:`record_launches`' JSON lines, or a tritonparse log file or folder,
    :mod:`traceconf.triton.structured_log`): one block of rows per kernel and launch."""
    from traceconf.triton.cached import harvest_cache
    return harvest_cache(cache_dir(path), read_launches(launches) if launches else [], device, _arch(device),
                         workers)
