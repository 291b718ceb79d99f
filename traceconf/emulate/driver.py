"""Emulate one kernel launch: choose the CTAs to run, run them in chunks, assemble the accesses.

Scaling: the first CTA runs alone while the emulator watches for dependence
on the CTA index (:data:`taint.CTA`) in a shared address, in the guard of a
shared access, or in a branch condition.  Without any, every CTA executes
the same shared accesses at the same addresses (they can only differ through
one of those), so the counts of CTA 0 times the number of CTAs are exact:
``scale`` = number of CTAs.  Otherwise every CTA is emulated (``scale`` = 1),
or, when ``Launch.ctas`` asks for fewer, that many CTAs spread evenly over
the grid, and ``sampled`` = (analysed, total) replaces ``scale``.

With ``--data`` buffers and a kernel that writes global memory, a CTA may
load what an earlier one stored: loaded values then count as CTA-dependent
and the CTAs run one at a time in launch order (one possible schedule).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from traceconf.accesses import WarpAccesses
from traceconf.emulate.contents import BUFFER_SPACING, GLOBAL_BASE, Buffer, GlobalContents, compress
from traceconf.emulate import taint
from traceconf.emulate.launch import Launch, resolve_block, resolve_data, resolve_grid, resolve_params
from traceconf.emulate.layout import lay_out
from traceconf.emulate.memory import space_of
from traceconf.emulate.operands import Context
from traceconf.emulate.program import link
from traceconf.emulate.regions import read_registers, value_facts
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
    module_rows = [slot.row for slot in program.slots]
    memory = _global_contents(resolve_data(launch, kernel_row), params, kernel_row, module_rows)
    declarations = [variable for name in program.functions for variable in module.kernel(name).get("shared") or []]
    layout = lay_out(declarations, int(launch.dynamic_smem))
    param_rows = kernel_row.get("params") or []
    ctx = Context(kernel=kernel, path=path, layout=layout, param_names=[p["name"] for p in param_rows],
                  param_values=params, param_bytes={p["name"]: p.get("bytes") for p in param_rows},
                  address_bits=int(kernel_row.get("address_size") or 64), memory=memory)
    total = grid[0] * grid[1] * grid[2]
    if not _touches_shared(program):
        # nothing can touch shared memory: no launch fact is needed and nothing needs to run
        return EmulationResult(accesses=WarpAccesses.empty(kernel, launch.warp_size), scale=total,
                               analysed_ctas=[], unresolved=[], shared_layout=layout.variables,
                               notes=[f"{kernel} has no shared-memory instruction"])
    ctx.read_registers = read_registers(program)
    ctx.relevant_registers, ctx.shared_values = value_facts(program, global_values=memory is not None)
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
        if memory is not None and memory.written:
            # CTAs that communicate through global memory (counters, spin locks) run one after the
            # other, in launch order: one schedule of the hardware's, and a lock taken is released
            per_chunk = 1
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
    if memory is not None:
        notes += [f"data: {buffer.name} = {buffer.description}" for buffer in memory.buffers]
        notes += [f"{why}: its values stay unknown (pass --data for it)" for why in memory.unserved.values()]
    notes += _extent_note(findings.extent, layout, launch.dynamic_smem)
    notes += findings.stop_notes
    variables = _assumed_extern_size(layout, findings.extent, launch.dynamic_smem)
    return EmulationResult(accesses=accesses, scale=scale, analysed_ctas=analysed,
                           unresolved=sorted(findings.unresolved_rows.values(),
                                             key=lambda u: (u["ptx_line"], u["reason"])),
                           shared_layout=variables, sampled=sampled, notes=notes,
                           cta_dependence=list(findings.cta_reasons),
                           steps=sum(m.steps for m in machines))


def _writes_global(rows: list[dict]) -> bool:
    """Whether some instruction may store to global memory (st/red/atom outside the shared space)."""
    return any(row["opcode"] in ("st", "red", "atom") and space_of(row) in ("global", "generic") for row in rows)


def _global_contents(data: dict, params: dict[str, int], kernel_row: dict,
                     module_rows: list[dict]) -> GlobalContents | None:
    """The --data buffers; a pointer without a --param value gets an address of its own (params is updated)."""
    if not data:
        return None
    names = [p["name"] for p in kernel_row.get("params") or []]
    buffers = []
    for name, given in data.items():
        if name not in params:
            params[name] = GLOBAL_BASE + names.index(name) * BUFFER_SPACING
        raw = np.ascontiguousarray(given.array).view(np.uint8).reshape(-1).copy()
        buffers.append(Buffer(name=name, base=params[name], data=raw,
                              taint=np.full(len(raw), compress(np.array([taint.ZERO]))[0], dtype=np.uint8),
                              dtype=given.array.dtype, description=given.description))
    return GlobalContents(buffers, written=_writes_global(module_rows))


def extent_note(highest: int, places: list[str], shared_bytes: int, extern_offset: int | None,
                dynamic_smem: int) -> list[str]:
    """One note per kernel when accesses reach past its shared memory: how far, and from where (``places``:
    "PTX line 81", "SASS 0x0070", ...).  With extern shared memory (``extern_offset``: where it starts) and no
    ``--dynamic-smem``, the size the accesses reach is taken as the dynamic size and the note says so: counts
    do not depend on it (accesses are counted wherever they land)."""
    where = ", ".join(places[:5]) + (f" and {len(places) - 5} more" if len(places) > 5 else "")
    if extern_offset is not None and not dynamic_smem:
        needed = highest - extern_offset
        return [f"no --dynamic-smem given: the extern shared array is used up to byte {needed} ({where}), so it "
                f"was taken as --dynamic-smem {needed}; pass the launch's real size to check it"]
    return [f"accesses reach shared byte {highest} but the kernel's shared memory is {shared_bytes} bytes "
            f"({where})" + (": pass a larger --dynamic-smem" if extern_offset is not None else "")]


def _extent_note(extent: dict, layout, dynamic_smem: int) -> list[str]:
    if not extent:
        return []
    lines = sorted(int(row["ptx_line"]) for _, row in extent.values())
    return extent_note(max(h for h, _ in extent.values()), [f"PTX line {line}" for line in lines],
                       layout.total_bytes, layout.dynamic_offset if layout.has_extern() else None, dynamic_smem)


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

    address = np.concatenate([entry[5] for _, entry in parts]).astype(np.int64, copy=False)
    return WarpAccesses(kernel, cta, warp, np.arange(len(cta), dtype=np.int64), per_execution(1, np.int32),
                        per_execution(2, np.int8), per_execution(3, np.int16), per_execution(4, np.int8), address,
                        per_execution(6, np.int8))
