"""Emulate one kernel launch: choose the CTAs to run, run them in chunks, assemble the accesses.

Scaling: the first CTA runs alone while the emulator watches for dependence
on the CTA index (:data:`taint.CTA`) in a shared address, in the guard of a
shared access, or in a branch condition.  Without any, every CTA executes
the same shared accesses at the same addresses (they can only differ through
one of those), so the counts of CTA 0 times the number of CTAs are exact:
``scale`` = number of CTAs.  Otherwise every CTA is emulated (``scale`` = 1),
or, when ``Launch.ctas`` asks for fewer, that many CTAs spread evenly over
the grid, and ``sampled`` = (analysed, total) replaces ``scale``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from traceconf.accesses import WarpAccesses
from traceconf.emulate.launch import Launch, resolve_block, resolve_grid, resolve_params
from traceconf.emulate.layout import lay_out
from traceconf.emulate.memory import space_of
from traceconf.emulate.operands import Context
from traceconf.emulate.program import link
from traceconf.emulate.simt import Findings, Machine, compile_slot
from traceconf.errors import InputError
from traceconf.ptx.opcodes import may_access_shared, shared_access_kind

#: Threads emulated together when every CTA must run (bounds memory, keeps numpy arrays large).
CHUNK_THREADS = 1 << 15


@dataclass
class EmulationResult:
    accesses: WarpAccesses
    scale: int | None
    analysed_ctas: list[int]
    unresolved: list[dict]
    shared_layout: list[dict]
    sampled: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)
    cta_dependence: list[str] = field(default_factory=list)
    steps: int = 0


def emulate(module, kernel: str, launch: Launch, progress: Callable[[int, int], None] | None = None
            ) -> EmulationResult:
    path = str(getattr(module, "path", "") or "") or None
    kernel_row = module.kernel(kernel)
    if not kernel_row.get("entry", True):
        raise InputError(f"{kernel} is a .func, not a kernel (.entry): it cannot be launched", file=path,
                         line=kernel_row.get("ptx_line"))
    if launch.warp_size < 32 or launch.warp_size % 32:
        raise InputError(f"warp size {launch.warp_size} is not supported (32 or 64)")
    block, grid = resolve_block(launch, kernel_row), resolve_grid(launch, kernel_row)
    params = resolve_params(launch, kernel_row)
    program = link(module, kernel, path)
    declarations = [variable for name in program.functions for variable in module.kernel(name).get("shared") or []]
    layout = lay_out(declarations, int(launch.dynamic_smem))
    param_rows = kernel_row.get("params") or []
    ctx = Context(kernel=kernel, path=path, layout=layout, param_names=[p["name"] for p in param_rows],
                  param_values=params, param_bytes={p["name"]: p.get("bytes") for p in param_rows},
                  address_bits=int(kernel_row.get("address_size") or 64))
    total = grid[0] * grid[1] * grid[2]
    if not _touches_shared(program):
        # nothing can touch shared memory: no launch fact is needed and nothing needs to run
        return EmulationResult(accesses=WarpAccesses.empty(kernel, launch.warp_size), scale=total,
                               analysed_ctas=[], unresolved=[], shared_layout=layout.variables,
                               notes=[f"{kernel} has no shared-memory instruction"])
    compiled = [compile_slot(slot, ctx) for slot in program.slots]
    findings = Findings(program, layout.total_bytes)

    def run(ctas: np.ndarray) -> Machine:
        machine = Machine(program, compiled, ctx, ctas, block, grid, launch.warp_size,
                          (layout.static_bytes, layout.dynamic_bytes), launch.max_steps, findings)
        machine.run()
        return machine

    first = run(np.array([0]))
    machines, sampled, scale = [first], None, total
    analysed = [0]
    if findings.cta_reasons and total > 1:
        if launch.ctas is not None and launch.ctas < total:
            chosen = np.unique(np.linspace(0, total - 1, max(1, int(launch.ctas))).round().astype(np.int64))
            sampled, scale = (len(chosen), total), None
        else:
            chosen, scale = np.arange(total, dtype=np.int64), 1
        analysed = chosen.tolist()
        rest = chosen[chosen != 0]
        if 0 not in analysed:
            machines = []
        per_chunk = max(1, CHUNK_THREADS // first.padded)
        done = len(machines)
        for start in range(0, len(rest), per_chunk):
            machines.append(run(rest[start:start + per_chunk]))
            done += len(rest[start:start + per_chunk])
            if progress:
                progress(done, len(chosen))
    elif progress:
        progress(1, 1)
    accesses = _assemble(kernel, machines, launch.warp_size)
    notes = list(findings.cta_reasons and ["shared accesses depend on the CTA index ("
                                           + "; ".join(findings.cta_reasons[:3]) + ")"])
    notes += _extent_note(findings.extent, layout, launch.dynamic_smem)
    notes += findings.stop_notes
    variables = _assumed_extern_size(layout, findings.extent, launch.dynamic_smem)
    return EmulationResult(accesses=accesses, scale=scale, analysed_ctas=analysed,
                           unresolved=sorted(findings.unresolved_rows.values(),
                                             key=lambda u: (u["ptx_line"], u["reason"])),
                           shared_layout=variables, sampled=sampled, notes=notes,
                           cta_dependence=list(findings.cta_reasons),
                           steps=sum(m.steps for m in machines))


def _extent_note(extent: dict, layout, dynamic_smem: int) -> list[str]:
    """One note per kernel when accesses reach past its shared memory: how far, and from which PTX lines.

    An ``extern`` array with no ``--dynamic-smem`` is the usual cause; the counts do not depend on the size
    (accesses are counted wherever they land), so the note says which size the launch must at least have.
    """
    if not extent:
        return []
    highest = max(h for h, _ in extent.values())
    lines = sorted(int(row["ptx_line"]) for _, row in extent.values())
    where = ", ".join(map(str, lines[:5])) + (f" and {len(lines) - 5} more" if len(lines) > 5 else "")
    if layout.has_extern() and not dynamic_smem:
        needed = highest - layout.dynamic_offset
        return [f"no --dynamic-smem given: the extern shared array is used up to byte {needed} (PTX lines "
                f"{where}), so it was taken as --dynamic-smem {needed}; pass the launch's real size to check it"]
    return [f"accesses reach shared byte {highest} but the kernel's shared memory is {layout.total_bytes} bytes "
            f"(PTX lines {where})" + (": pass a larger --dynamic-smem" if layout.has_extern() else "")]


def _assumed_extern_size(layout, extent: dict, dynamic_smem: int) -> list[dict]:
    """The layout's variables, extern arrays sized to what the accesses reach when no --dynamic-smem was given."""
    if dynamic_smem or not extent or not layout.has_extern():
        return layout.variables
    needed = max(h for h, _ in extent.values()) - layout.dynamic_offset
    return [dict(v, bytes=needed) if v["extern"] else v for v in layout.variables]


def _touches_shared(program) -> bool:
    """Whether any instruction can reach shared memory: one names the shared space, or a generic
    access exists and some ``cvta.shared`` can produce a shared window address for it."""
    rows = [slot.row for slot in program.slots]
    direct = any(shared_access_kind(row["opcode"], row["state_space"]) for row in rows)
    window = any(row["opcode"] == "cvta" and space_of(row) == "shared" and "to" not in (row["modifiers"] or [])
                 for row in rows)
    return direct or (window and any(may_access_shared(row["opcode"], row["state_space"]) for row in rows))


def _assemble(kernel: str, machines: list[Machine], warp_size: int) -> WarpAccesses:
    """One WarpAccesses from every chunk's log, execution ids in emulation order."""
    parts = [(machine, entry) for machine in machines for entry in machine.log]
    if not parts:
        return WarpAccesses.empty(kernel, warp_size)
    counts = np.array([len(entry[0]) for _, entry in parts])
    cta = np.concatenate([machine.cta_of_warp[entry[0]] for machine, entry in parts]).astype(np.int64)
    warp = np.concatenate([machine.warp_of_warp[entry[0]] for machine, entry in parts]).astype(np.int32)

    def per_execution(position: int, dtype) -> np.ndarray:
        return np.repeat(np.array([entry[position] for _, entry in parts], dtype=dtype), counts)

    address = np.concatenate([entry[5] for _, entry in parts]).astype(np.int64)
    return WarpAccesses(kernel, cta, warp, np.arange(len(cta), dtype=np.int64), per_execution(1, np.int32),
                        per_execution(2, np.int8), per_execution(3, np.int16), per_execution(4, np.int8), address)
