"""Static SIMT emulation of SASS with the PTX emulator's machinery.

The scheduler, thread state, taint tracking, barrier handling, CTA scaling and
access log are those of :mod:`traceconf.emulate` (``Machine``, ``Findings``,
``ThreadState``): the only SASS-specific parts are the instruction semantics
(:mod:`.semantics`) and the wording of messages (SASS pcs instead of PTX
lines).  Threads run at their own SASS instruction; the lowest pc runs first,
which reconverges at the immediate post-dominator for the structured code
ptxas emits (BSSY/BSYNC mark the same points and need no action).  Calls
(``CALL.REL`` + ``RET.REL Rx``) follow the return address the caller leaves
in a register, per thread.

Shared addresses: on sm_90 ptxas builds the shared window from ``S2UR
SR_CgaCtaId`` and ``UMOV 0x400`` (1 KiB reserved at the start of shared
memory); with one CTA per cluster the CTA id in the cluster is 0, and the
reserved kilobyte is subtracted so that recorded offsets match the PTX
layout (bank arithmetic is unchanged: 0x400 is a multiple of every bank
period).
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate.alu import SHARED_WINDOW_BASE
from traceconf.emulate.contents import SharedContents, module_global_addresses
from traceconf.emulate.driver import (EmulationResult, data_notes, extent_note, global_contents,
                                      modelled_spaces)
from traceconf.emulate.grid import Consume, Emulator, Progress, run_grid
from traceconf.emulate.launch import Launch
from traceconf.emulate.program import Program, Slot
from traceconf.emulate.regions import ControlFacts, flow_edges
from traceconf.emulate.simt import Findings, Machine
from traceconf.errors import InputError
from traceconf.sass.listing import SassModule, arch_number, default_param_base
from traceconf.sass.opcodes import global_op, shared_op, transfer, uncounted_op, writes_memory
from traceconf.sass.classes import compile_sass_checks
from traceconf.emulate.slice import dependence
from traceconf.emulate.speculation import Speculation
from traceconf.sass.dataflow import sass_effect, shared_values_matter
from traceconf.sass.local import LocalMemory
from traceconf.sass.control import indirect_target, reconvergence_targets
from traceconf.sass.operands import ZERO_REGS, SassContext, parse_operand
from traceconf.sass.semantics import compile_instruction, written_registers

#: Reserved shared memory at the start of the shared window (sm_90+: 1 KiB for the system).
RESERVED_SHARED = ((90, 0x400),)


def reserved_shared(arch: str | None) -> int:
    number = arch_number(arch)
    return next((size for since, size in RESERVED_SHARED if number >= since), 0)


def _where(row: dict) -> str:
    return f"SASS {row['pc']:#06x} ({row['text']})"


class SassMachine(Machine):
    """The PTX machine with SASS locations in its messages."""

    where = staticmethod(_where)
    _local: LocalMemory | None = None
    _fields: dict | None = None

    @property
    def bit_fields(self) -> dict:
        """Register → (array written, bits, their taint): bits of a register known apart from the rest
        (:func:`traceconf.sass.operands.record_field`)."""
        if self._fields is None:
            self._fields = {}
        return self._fields

    def line_of(self, row: dict) -> int | None:
        """The line of the input file: the PTX line ptxas recorded when the SASS came from the PTX, else the
        listing's."""
        return row.get("ptx_line") if self.ctx.from_ptx else row.get("line")

    def shared_contents(self) -> SharedContents:
        """The kernel's shared bytes per CTA come from the binary (the listing has no PTX layout)."""
        if self._shared is None:
            self._shared = SharedContents(len(self.ctas), self.ctx.shared_bytes)
        return self._shared

    def local_memory(self) -> LocalMemory:
        """Each thread's local memory (spills and call frames), made on the first STL or LDL."""
        if self._local is None:
            self._local = LocalMemory(self.size)
        return self._local

    def forget_memory(self, lanes: np.ndarray) -> None:
        super().forget_memory(lanes)
        if self._local is not None:
            self._local.forget(lanes)


def is_shared(row: dict) -> bool:
    return shared_op(".".join([row["opcode"], *(row["modifiers"] or [])])) is not None


def _successors(slots: list[Slot], index: int) -> list[int]:
    slot = slots[index]
    kind = transfer(slot.row["opcode"])
    guarded = bool(slot.row.get("guard")) and slot.row.get("guard") not in ("PT", "UPT")
    following = [index + 1] if guarded else []
    if kind == "indirect" or (kind == "call" and slot.target is None):
        return list(range(len(slots)))      # an indirect branch or call may go anywhere
    if kind in ("branch", "call", "reconverge"):
        return ([slot.target] if slot.target is not None else []) + following
    end = len(slots)                         # past the last instruction: the thread has left the kernel
    if kind == "exit":
        return [end] + following
    if kind == "return":
        return _return_points(slots, index) + following
    return [index + 1]


def _return_points(slots: list[Slot], index: int) -> list[int]:
    """Where the RET at ``index`` may go: after each direct CALL of the subroutine it ends (the nearest call
    target before it), so that a branch around a call (``FCHK`` → the division slow path) rejoins after it;
    after every CALL, or out of the kernel, where that is not known (calls through pointers, a RET of the
    kernel's own code)."""
    calls = [(i, s.target) for i, s in enumerate(slots) if transfer(s.row["opcode"]) == "call"]
    if all(target is not None for _, target in calls):
        starts = [target for _, target in calls if target <= index]
        if starts:
            start = max(starts)
            return [i + 1 for i, target in calls if target == start]
    return [i + 1 for i, _ in calls] + [len(slots)]


#: Branch regions and reachability over SASS: data-dependent branches are explored as at the PTX level.
SASS_FACTS = ControlFacts(successors=_successors, written=lambda slot: list(written_registers(slot.row)),
                          is_shared=lambda slot: is_shared(slot.row),
                          writes_memory=lambda slot: writes_memory(".".join([slot.row["opcode"],
                                                                             *(slot.row["modifiers"] or [])])),
                          writes_carry=lambda slot: False)      # carries live in predicate registers


class SassFindings(Findings):
    """Findings keyed by SASS instruction; regions and reachability follow SASS branches."""

    where = staticmethod(_where)
    facts = SASS_FACTS

    @staticmethod
    def entry(row: dict, reason: str) -> dict:
        return {"instruction": int(row["instruction"]), "ptx": row["text"], "ptx_line": row.get("ptx_line"),
                "pc": int(row["pc"]), "reason": reason, "executions": 0, "uncounted": False}


def writes_global(rows: list[dict]) -> bool:
    """Whether some instruction may write global memory (STG, ATOMG, REDG; generic ST/ATOM/RED may too)."""
    return any((op := global_op(".".join([row["opcode"], *(row["modifiers"] or [])]))) is not None and op.kind != "ld"
               for row in rows)


def kernel_params(kernel_row: dict) -> list[dict]:
    return list(kernel_row.get("params") or [])


def reached_globals(module: SassModule, kernel: str) -> list[dict]:
    """The module globals (``__device__`` variables, the cubin's ``.nv.global``/``.nv.global.init``) the kernel
    reaches: those whose address the relocations put at a constant-bank word its code reads (``c[0x4][0x8]``;
    ``RZ`` is word 0), all of them where it indexes such a bank with a register or makes a call (a callee's
    reads are not listed here)."""
    if not module.globals:
        return []
    relocations = {**module.relocations.get("", {}), **module.relocations.get(kernel, {})}
    read = set()
    for row in module.instructions_of(kernel):
        if transfer(row["opcode"]) == "call":
            return module.globals
        for op in map(parse_operand, row["operands"] or []):
            if op.kind != "const" or op.bank not in relocations:
                continue
            if any(name not in ZERO_REGS for name, _, _ in op.registers):
                return module.globals
            read.add((op.bank, op.value))
    names = {symbol for bank, rows in relocations.items() for offset, symbol, _, _ in rows if (bank, offset) in read}
    return [variable for variable in module.globals if variable["name"] in names]


def emulate_sass(module: SassModule, kernel: str, launch: Launch, progress: Progress | None = None,
                 consume: Consume | None = None) -> EmulationResult:
    """Emulate one launch of a SASS kernel (``launch`` resolved: :func:`~traceconf.emulate.launch.resolve_launch`);
    with ``consume``, each batch of accesses goes there and is dropped."""
    path = module.path
    kernel_row = module.kernel(kernel)
    arch = kernel_row.get("arch") or module.arch
    params = kernel_params(kernel_row)
    block, grid = launch.block, launch.grid
    if launch.warp_size != 32:
        raise InputError(f"kernel {kernel}: SASS runs 32-lane warps; warp size {launch.warp_size} does not apply")
    values = dict(launch.params)
    rows = module.instructions_of(kernel)
    # the --data buffers get the addresses the PTX level gives them (pointers without a --param value)
    module_globals = reached_globals(module, kernel)
    memory = global_contents(launch.data, values, {"kernel": kernel, "params": params}, writes_global(rows),
                             module_globals)
    pc_index = {int(row["pc"]): index for index, row in enumerate(rows)}
    labels = {label: index for index, row in enumerate(rows) for label in row.get("labels") or []}
    base = reserved_shared(arch)
    shared_bytes = kernel_row.get("shared_bytes")
    layout_bytes = max(0, int(shared_bytes) - base) + int(launch.dynamic_smem) if shared_bytes is not None else None
    ctx = SassContext(kernel, path, arch, kernel_row.get("param_base") or default_param_base(arch), params, values,
                      base, SHARED_WINDOW_BASE[64] >> 32, pc_index)
    ctx.reconvergence = reconvergence_targets(rows, pc_index)
    ctx.memory = memory
    ctx.from_ptx = module.from_ptx
    # the loader writes the module globals' addresses into the constant banks (c[0x4][...] on sm_90)
    ctx.globals = module_global_addresses(module_globals)
    ctx.constants = module.constant_banks(kernel, ctx.globals)
    slots = [Slot(row=row) for row in rows]
    _set_targets(slots, ctx, labels)       # the branch targets, which the dataflow below follows
    # shared memory holds values where a shared read decides a branch, and wherever --data gives values to keep
    ctx.shared_values = layout_bytes is not None and (memory is not None or shared_values_matter(
        rows, [_successors(slots, index) for index in range(len(slots))]))
    ctx.shared_bytes = layout_bytes or 0
    compiled = [compile_instruction(slot, ctx, labels) for slot in slots]
    for slot, op in zip(slots, compiled):
        slot.target = getattr(op, "target", None)
    _set_targets(slots, ctx, labels)
    program = Program(kernel=kernel, slots=slots, functions=[kernel])
    findings = SassFindings(program, layout_bytes if layout_bytes is not None else 1 << 40)
    total = grid[0] * grid[1] * grid[2]
    notes = [f"SASS opcode {name} is not modelled: its results are treated as unknown"
             for name in sorted(ctx.unknown_opcodes)]
    descriptor_ops = sorted({row["opcode"] for row in rows if uncounted_op(row["opcode"])})
    if descriptor_ops:
        notes.append(f"{', '.join(descriptor_ops)} read or write shared memory through matrix/tensor descriptors "
                     "(wgmma, TMA), not per-lane addresses: their wavefronts are not counted")
    if not any(is_shared(row) for row in rows):
        return EmulationResult.nothing_to_run(kernel, 32, total, [])

    effects = [sass_effect(row, written_registers(row), memory is not None) for row in rows]
    edges, modelled = flow_edges(slots, _successors), modelled_spaces(memory)
    speculation = Speculation(effects, lambda refined, spaces: dependence(refined, edges, spaces), modelled,
                              dependence(effects, edges, modelled), [int(row["instruction"]) for row in rows])

    def machine(ctas: np.ndarray, watch) -> Machine:
        return SassMachine(program, compiled, ctx, ctas, block, grid, 32, (layout_bytes or 0, 0), launch.max_steps,
                           findings, watch, speculation.plan())

    # CTAs that may communicate through global memory (counters, spin locks) run as in launch order
    serial = memory is not None and memory.written
    checks = compile_sass_checks(program, ctx) if launch.classes and not serial else None
    outcome = run_grid(Emulator(kernel, 32, block, grid, machine, findings, checks, memory if serial else None,
                                speculation), launch, progress, consume)
    notes += data_notes(memory)
    if findings.extent:
        # SASS does not declare extern arrays: accesses past the static shared memory are the dynamic part.
        places = [f"SASS {row['pc']:#06x}" for _, row in sorted(findings.extent.values(), key=lambda e: e[1]["pc"])]
        static = max(0, int(shared_bytes or 0) - base)
        notes += extent_note(max(h for h, _ in findings.extent.values()), places, layout_bytes or 0, static,
                             int(launch.dynamic_smem))
    return EmulationResult.of(outcome, findings, [], notes, order=lambda entry: (entry["pc"], entry["reason"]))


def _set_targets(slots: list[Slot], ctx: SassContext, labels: dict[str, int]) -> None:
    """Branch / call destinations as slot indices (for reachability of unresolved reports)."""
    from traceconf.sass.operands import parse_operand
    for slot in slots:
        kind = transfer(slot.row["opcode"])
        if kind == "reconverge":
            slot.target = ctx.reconvergence.get(int(slot.row["pc"]))
        if kind == "branch" or (kind == "call" and indirect_target(
                [parse_operand(text) for text in slot.row["operands"] or []]) is None):
            for text in reversed(slot.row["operands"] or []):
                op = parse_operand(text)
                if op.kind == "label" and op.name in labels:
                    slot.target = labels[op.name]
                    break
                if op.kind == "imm" and op.value in ctx.pc_index:
                    slot.target = ctx.pc_index[op.value]
                    break
