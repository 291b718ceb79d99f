"""Registers declared inside a nested ``{ ... }`` block belong to that block.

Inline asm declares its temporaries in a block of its own — CUB's warp scan
writes ``{ .reg .s32 r0; .reg .pred p; shfl.sync.up.b32 r0|p, ...; @p add.s32 r0, r0, %r5; ... }``
once per step — and a block's ``.reg`` may shadow a register of an enclosing
scope.  The emulator keys registers by name, so every register a block
declares is renamed, in the declaration and in every use inside the block,
to ``{N}name``, N numbering the blocks of the function in order (no PTX
identifier starts with ``{``, so a renamed register never meets a declared
one).  Both parse paths hand the table builder the same atoms, so this runs
once, on the atoms, whichever path read the file.
"""

from __future__ import annotations

import numpy as np

from traceconf.ptx.bodies import INSTRUCTION, SCOPE_CLOSE, SCOPE_OPEN, VARIABLE, Bodies
from traceconf.ptx.registers import DeclaredRegisters

#: Operand kinds whose ``name`` is a register (or may be one: a bare name, an address base).
_NAMED_KINDS = ("reg", "name", "pred_not", "neg", "address")


class _Block(DeclaredRegisters):
    """The registers one block declares."""

    def __init__(self, number: int, serial: int):
        super().__init__()
        self.prefix = "{%d}" % number
        self.serial = serial                    # unique over the whole file (renamed copies are cached by it)


def rename_scoped_registers(bodies: Bodies, atoms: np.ndarray, atom_function: np.ndarray) -> np.ndarray:
    """``atoms`` (the atom ids of every body, in order) with every declaration and instruction inside a
    block that declares registers replaced by a renamed copy (appended to ``bodies``)."""
    kinds = np.asarray(bodies.kinds, dtype=np.int8)[atoms]
    opens, closes = kinds == SCOPE_OPEN, kinds == SCOPE_CLOSE
    if not opens.any():
        return atoms
    depth = np.cumsum(opens.astype(np.int64) - closes)
    inside = np.flatnonzero((depth > 0) | closes)
    declared = inside[kinds[inside] == VARIABLE]
    if not any(bodies.atoms[atom].space == "reg" for atom in atoms[declared].tolist()):
        return atoms
    atoms = atoms.copy()
    stack: list[_Block] = []
    numbers: dict[int, int] = {}
    renamed: dict[tuple, int] = {}
    for position in inside.tolist():
        kind, atom = kinds[position], int(atoms[position])
        if kind == SCOPE_OPEN:
            function = int(atom_function[position])
            numbers[function] = numbers.get(function, 0) + 1
            stack.append(_Block(numbers[function], position))
        elif kind == SCOPE_CLOSE:
            stack.pop()
        elif kind == VARIABLE and bodies.atoms[atom].space == "reg":
            variable = bodies.atoms[atom]
            block = stack[-1]
            block.declare(variable.name, variable.type, variable.count)
            atoms[position] = _append(bodies, variable._replace(name=block.prefix + variable.name), VARIABLE)
        elif kind == INSTRUCTION and any(stack):
            key = (atom, *(block.serial for block in stack))
            if key not in renamed:
                renamed[key] = _append(bodies, _renamed_instruction(bodies.atoms[atom], stack), INSTRUCTION)
            atoms[position] = renamed[key]
    return atoms


def _append(bodies: Bodies, payload, kind: int) -> int:
    bodies.atoms.append(payload)
    bodies.kinds.append(kind)
    return len(bodies.atoms) - 1


def _renamed_instruction(fields: tuple, stack: list[_Block]) -> tuple:
    """Instruction fields (guard, guard_negated, info, operands, text) with the blocks' registers renamed."""
    def rename(name):
        if name is None:
            return None
        base = name.split(".", 1)[0]      # `r0.x`, `x.h10`
        for block in reversed(stack):
            if block.declares(base):
                return block.prefix + name
        return name

    guard, negated, info, operands, text = fields
    operands = tuple(operand._replace(name=rename(operand.name) if operand.kind in _NAMED_KINDS else operand.name,
                                      elements=tuple(map(rename, operand.elements))
                                      if operand.elements is not None else None)
                     for operand in operands)
    return rename(guard), negated, info, operands, text
