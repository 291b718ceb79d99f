"""Emulate one kernel launch of PTX: link and compile the kernel, then let :mod:`.grid` run its CTAs.

:mod:`.grid` decides which CTAs run (one standing for all, CTA classes, a
sample, or every CTA) and streams their accesses; this module sets up what
the PTX machine needs (layout, parameters, ``--data`` buffers, the class
checks of :mod:`.classes`) and says in notes what the counts rest on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from traceconf.accesses import WarpAccesses
from traceconf.emulate.classes import compile_checks
from traceconf.emulate.contents import BUFFER_SPACING, GLOBAL_BASE, Buffer, GlobalContents, compress, \
    module_global_addresses, module_global_buffers
from traceconf.emulate import taint
from traceconf.emulate.launch import Launch
from traceconf.emulate.grid import Consume, Emulator, GridOutcome, Progress, outcome_notes, run_grid
from traceconf.emulate.layout import lay_out
from traceconf.emulate.spaces import space_of
from traceconf.emulate.operands import Context, register_key
from traceconf.emulate.program import link
from traceconf.emulate.regions import flow_edges, ptx_effect, read_registers, register_names
from traceconf.emulate.slice import dependence
from traceconf.emulate.speculation import Speculation
from traceconf.emulate.simt import Findings, Machine, compile_slot
from traceconf.errors import InputError
from traceconf.ptx.opcodes import STORE_OPCODES, may_access_shared, shared_access_kind

@dataclass
class EmulationResult:
    accesses: WarpAccesses            # every access when no ``consume`` was given, else empty
    scale: int | None                 # every execution stands for this many CTAs (None: see weights/classes)
    analysed_ctas: list[int]          # CTAs emulated (the first grid.LISTED_CTAS)
    unresolved: list[dict]
    shared_layout: list[dict]
    sampled: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)
    cta_dependence: list[str] = field(default_factory=list)
    steps: int = 0
    work: int = 0                     # warp steps spent, as the work limit counts them (launch.Limits)
    weights: np.ndarray | None = None   # per execution of ``accesses``: the CTAs it stands for
    classes: list[dict] = field(default_factory=list)  # {"ctas", "count", "emulated"} per proved class
    class_count: int = 0
    emulated_ctas: int = 0
    covered_ctas: int = 0             # CTAs the counts stand for (== total unless sampled or partial)
    total_ctas: int = 0
    partial: str | None = None        # why the emulation stopped early (None: it did not)
    #: copies whose global sources are offsets from parameters without a value (taken at cudaMalloc's
    #: alignment, traceconf.emulate.allocation): instruction -> the parameters' names
    aligned_sources: dict[int, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, outcome: GridOutcome, findings, shared_layout: list[dict], notes: list[str],
           order=lambda entry: (entry["ptx_line"], entry["reason"])) -> "EmulationResult":
        """The result of one run of :func:`grid.run_grid`: the findings' unresolved entries carry the executions
        the run left out, weighted like the counts."""
        unresolved = sorted(({**entry, "executions": outcome.unresolved.get(key, 0)}
                             for key, entry in findings.unresolved_rows.items()), key=order)
        return cls(accesses=outcome.accesses, scale=outcome.scale, analysed_ctas=outcome.analysed_ctas,
                   unresolved=unresolved, shared_layout=shared_layout, sampled=outcome.sampled,
                   notes=outcome_notes(outcome, findings.cta_reasons) + notes + findings.alignment_notes(),
                   cta_dependence=list(findings.cta_reasons), steps=outcome.steps, work=outcome.work,
                   weights=outcome.weights,
                   classes=outcome.classes, class_count=outcome.class_count, emulated_ctas=outcome.emulated_ctas,
                   covered_ctas=outcome.covered_ctas, total_ctas=outcome.total_ctas, partial=outcome.partial,
                   aligned_sources={instruction: names for instruction, (_, names) in findings.aligned.items()})

    @classmethod
    def nothing_to_run(cls, kernel: str, warp_size: int, total: int, shared_layout: list[dict]
                       ) -> "EmulationResult":
        """A kernel no instruction of which can touch shared memory: nothing runs, nothing is counted."""
        return cls(accesses=WarpAccesses.empty(kernel, warp_size), scale=total, analysed_ctas=[], unresolved=[],
                   shared_layout=shared_layout, notes=[f"{kernel} has no shared-memory instruction"],
                   covered_ctas=total, total_ctas=total)


def emulate(module, kernel: str, launch: Launch, progress: Progress | None = None,
            consume: Consume | None = None) -> EmulationResult:
    """Emulate one launch of ``kernel`` (``launch`` resolved: :func:`~traceconf.emulate.launch.resolve_launch`);
    with ``consume``, each batch of accesses goes there and is dropped."""
    path = str(getattr(module, "path", "") or "") or None
    kernel_row = module.kernel(kernel)
    if not kernel_row.get("entry", True):
        raise InputError(f"{kernel} is a .func, not a kernel (.entry): it cannot be launched", file=path,
                         line=kernel_row.get("ptx_line"))
    if launch.warp_size < 32 or launch.warp_size % 32:
        raise InputError(f"warp size {launch.warp_size} is not supported (32 or 64)")
    block, grid, params = launch.block, launch.grid, dict(launch.params)
    program = link(module, kernel, path)
    module_rows = [slot.row for slot in program.slots]
    module_globals = reached_globals(module, program)
    memory = global_contents(launch.data, params, kernel_row, _writes_global(module_rows), module_globals)
    declarations = [variable for name in program.functions for variable in module.kernel(name).get("shared") or []]
    layout = lay_out(declarations, int(launch.dynamic_smem))
    param_rows = kernel_row.get("params") or []
    ctx = Context(kernel=kernel, path=path, layout=layout, param_names=[p["name"] for p in param_rows],
                  param_values=params, param_bytes={p["name"]: p.get("bytes") for p in param_rows},
                  address_bits=int(kernel_row.get("address_size") or 64), memory=memory,
                  globals=module_global_addresses(module_globals))
    if not _touches_shared(program):
        # nothing can touch shared memory: no launch fact is needed and nothing needs to run
        return EmulationResult.nothing_to_run(kernel, launch.warp_size, grid[0] * grid[1] * grid[2],
                                              layout.variables)
    ctx.read_registers, ctx.registers = read_registers(program), register_names(program)
    effects = [ptx_effect(slot, memory is not None) for slot in program.slots]
    edges, modelled = flow_edges(program.slots), modelled_spaces(memory)
    depends = dependence(effects, edges, modelled)
    # what the counts do not depend on is not computed even where it runs (a loaded value nobody needs)
    ctx.relevant_registers, ctx.shared_values = depends.needed_registers(effects), "shared" in depends.contents
    compiled = [compile_slot(slot, ctx) for slot in program.slots]
    findings = Findings(program, layout.total_bytes)
    speculation = Speculation(effects, lambda refined, spaces: dependence(refined, edges, spaces), modelled, depends,
                              [int(slot.row["instruction"]) for slot in program.slots])

    def machine(ctas: np.ndarray, watch) -> Machine:
        return Machine(program, compiled, ctx, ctas, block, grid, launch.warp_size,
                       (layout.static_bytes, layout.dynamic_bytes), launch.max_steps, findings, watch,
                       speculation.plan())

    # CTAs that may communicate through global memory (counters, spin locks) run as in launch order
    serial = memory is not None and memory.written
    checks = compile_checks(program, ctx) if launch.classes and not serial else None
    outcome = run_grid(Emulator(kernel, launch.warp_size, block, grid, machine, findings, checks,
                                memory if serial else None, speculation), launch, progress, consume)
    notes = data_notes(memory)
    notes += _extent_note(findings.extent, layout, launch.dynamic_smem)
    notes += findings.stop_notes + ctx.notes
    return EmulationResult.of(outcome, findings, _assumed_extern_size(layout, findings.extent, launch.dynamic_smem),
                              notes)


#: Operand kinds that may name a module symbol: ``table``, ``table[2]``, ``[counter+4]``.
SYMBOL_OPERANDS = frozenset({"symbol", "element", "address"})


def reached_globals(module, program) -> list[dict]:
    """The module globals (``.global`` at module scope, ``__device__`` variables) the kernel's code reaches: those a
    symbol operand of it or of a function it calls names (a register, an address through one, a label or a
    function spelled like one does not count).  The SASS level decides it from the constant-bank words its code
    reads (``traceconf.sass.emulate.reached_globals``)."""
    registers = register_names(program)
    named = {operand["name"] for slot in program.slots for operand in slot.row["operands"] or []
             if operand["kind"] in SYMBOL_OPERANDS and operand.get("name")
             and register_key(operand["name"], slot) not in registers}
    return [variable for variable in module.module_globals(program.kernel) if variable["name"] in named]


def modelled_spaces(memory: GlobalContents | None) -> frozenset:
    """The memory spaces whose contents the emulator keeps (both levels): global memory only with --data."""
    return frozenset({"shared", "local", "param"} | ({"global"} if memory is not None else set()))


def _writes_global(rows: list[dict]) -> bool:
    """Whether some instruction may store to global memory (st/red/atom outside the shared space)."""
    return any(row["opcode"] in STORE_OPCODES and space_of(row) in ("global", "generic") for row in rows)


def global_contents(data: dict, params: dict[str, int], kernel_row: dict, written: bool,
                    module_globals: list[dict] = ()) -> GlobalContents | None:
    """The --data buffers of a launch, at either level; a pointer without a --param value gets an address of its
    own (``params`` is updated), the same at both levels; with them the module globals (``__device__``
    variables) with their initial contents.  ``written``: some instruction of the kernel may store to global
    memory (the level's answer).  Without --data no global memory is modelled, module globals included."""
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
    return GlobalContents(buffers + module_global_buffers(list(module_globals)), written=written)


def data_notes(memory: GlobalContents | None) -> list[str]:
    """What the --data buffers were, and which reads found none."""
    if memory is None:
        return []
    return [f"data: {buffer.name} = {buffer.description}" for buffer in memory.buffers] + \
        [f"{why}: its values stay unknown (pass --data for it)" for why in memory.unserved.values()]


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


