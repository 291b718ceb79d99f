"""Link one kernel into a flat program: ``.func`` bodies inlined at their call sites.

Calls are inlined *in place* (the callee's body directly follows the call
instruction, the caller continues after it) so that the flat program keeps
the layout of structured code: the lowest-PC scheduling of :mod:`simt` then
reconverges threads that skipped a call with those that made it, exactly as
it does around an ``if``.  Each inlined instance gets its own register scope
(``name@N:%r1``); the callee's formal parameters are aliased to the caller's
argument symbols and its return parameters to the caller's result symbols, so
``st.param``/``ld.param`` pass values through one per-thread parameter store.
Accesses keep the callee's own static instruction id (module-wide ordinal),
so all call sites of a function add up per instruction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from traceconf.errors import InputError
from traceconf.ptx.registers import DeclaredRegisters

MAX_INLINE_DEPTH = 16


@dataclass
class Slot:
    """One instruction of the flat program."""

    row: dict                          # INSTRUCTIONS row
    scope: str = ""                    # register/param prefix of the inlined instance ("" = the kernel)
    aliases: dict = field(default_factory=dict)  # callee param symbol -> caller symbol
    target: int | None = None          # bra: flat pc of the label; call: pc after the body; ret: return pc
    stop_reason: str | None = None     # call that cannot be followed (recursion, indirect call)


@dataclass
class Program:
    kernel: str
    slots: list[Slot]
    functions: list[str]               # kernel first, then every inlined .func (for the shared layout)
    # the registers each scope declares (Slot.scope -> its function's .reg declarations, inline asm's scoped
    # `{ .reg ...; }` blocks among them under their renamed names); none at the SASS level
    declared: dict[str, DeclaredRegisters] = field(default_factory=dict)

    def register_type(self, name: str, slot: Slot) -> str | None:
        """The declared type of register ``name`` as ``slot`` names it (``pred``, ``b32``, ...), None if its
        scope declares no such register."""
        declared = self.declared.get(slot.scope)
        return declared.type_of(name) if declared is not None else None


def call_parts(row: dict, functions: set[str]) -> tuple[list[str], str | None, list[str]]:
    """(result symbols, callee, argument symbols) of a ``call``; callee None for an indirect call."""
    names = []
    for operand in row["operands"] or []:
        if operand["kind"] == "vector":
            names.extend(operand["elements"] or [])
        elif operand.get("name"):
            names.append(operand["name"])
    for position, name in enumerate(names):
        if name in functions:
            return names[:position], name, names[position + 1:]
    return [], None, []


def _label_map(rows: list[dict]) -> dict[str, int]:
    labels = {}
    for index, row in enumerate(rows):
        for label in row.get("labels") or []:
            labels[label] = index
    return labels


def _branch_label(row: dict) -> str | None:
    for operand in reversed(row["operands"] or []):
        if operand["kind"] in ("label", "symbol") and operand.get("name"):
            return operand["name"]
    return None


def link(module, kernel: str, path: str | None = None) -> Program:
    """Flatten ``kernel`` and every function it calls (recursively, up to MAX_INLINE_DEPTH)."""
    all_functions = set(module.kernels.column("kernel").to_pylist())
    bodies: dict[str, list[dict]] = {}
    registers: dict[str, DeclaredRegisters] = {}

    def body(name: str) -> list[dict]:
        if name not in bodies:
            bodies[name] = module.instructions_of(name)
            registers[name] = DeclaredRegisters(module.kernel(name).get("registers") or ())
        return bodies[name]

    slots: list[Slot] = []
    used: list[str] = [kernel]
    declared: dict[str, DeclaredRegisters] = {}
    counter = [0]

    def emit(function: str, scope: str, aliases: dict, stack: tuple[str, ...]) -> list[int]:
        """Append the function's instructions; return the slot indices of its ``ret``s to patch."""
        rows = body(function)
        declared[scope] = registers[function]
        labels = _label_map(rows)
        flat_of = {}                   # function-local index -> flat pc
        branches = []                  # (slot index, local target)
        returns = []
        for local, row in enumerate(rows):
            flat_of[local] = len(slots)
            slot = Slot(row=row, scope=scope, aliases=aliases)
            slots.append(slot)
            opcode = row["opcode"]
            if opcode == "brx":
                # its target is the index register's entry of a .branchtargets list: never the label itself
                slot.stop_reason = "indirect branch (brx.idx) is not followed"
                continue
            if opcode == "bra":
                label = _branch_label(row)
                if label is None or label not in labels:
                    raise InputError(f"branch target {label!r} is not a label of {function}", file=path,
                                     line=row["ptx_line"], source_line=row["text"])
                branches.append((len(slots) - 1, labels[label]))
            elif opcode == "ret":
                returns.append(len(slots) - 1)
            elif opcode == "call":
                results, callee, arguments = call_parts(row, all_functions)
                if callee is None:
                    slot.stop_reason = "indirect call through a register is not followed"
                    continue
                callee_rows = body(callee)
                if not callee_rows:
                    continue           # external declaration (vprintf, ...): results stay unknown
                if callee in stack or len(stack) >= MAX_INLINE_DEPTH:
                    slot.stop_reason = f"recursive or too deeply nested call of {callee}"
                    continue
                callee_row = module.kernel(callee)
                formals = [p["name"] for p in callee_row.get("params") or []]
                formal_returns = [p["name"] for p in callee_row.get("returns") or []]
                callee_aliases = {}
                for formal, actual in zip(formals, arguments):
                    callee_aliases[formal] = aliases.get(actual, scope + actual)
                for formal, actual in zip(formal_returns, results):
                    callee_aliases[formal] = aliases.get(actual, scope + actual)
                counter[0] += 1
                call_index = len(slots) - 1
                if callee not in used:
                    used.append(callee)
                inner_returns = emit(callee, f"{callee}@{counter[0]}:", callee_aliases, stack + (callee,))
                after = len(slots)
                slots[call_index].target = after
                for index in inner_returns:
                    slots[index].target = after
        end = len(slots)
        for index, local in branches:
            slots[index].target = flat_of.get(local, end)
        return returns

    entry_returns = emit(kernel, "", {}, (kernel,))
    for index in entry_returns:
        slots[index].target = None     # ret of the kernel itself: the thread exits
    return Program(kernel=kernel, slots=slots, functions=used, declared=declared)
