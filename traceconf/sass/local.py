"""Local memory at the SASS level: what ``STL`` spills (and a called function saves) ``LDL`` gets back.

ptxas spills registers to local memory and saves a callee's registers in its stack frame (``STL [R1]``,
``LDL [R1]``); a pointer into shared memory that went through local memory must come back as what it was — its
value, and whether and why it is unknown — or every generic access through it would be misread.  So the
emulator keeps each thread's local memory by 32-bit word: the words a thread stored, with their taint.  The
stack pointer ``R1`` starts at a known value (:data:`traceconf.sass.listing.STACK_TOP`: local addresses are
private to a thread, so any value serves as long as it is the same in every thread); a word never stored, or
stored at an address that is not known, reads back as ``LOADED`` (unknown), as before.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import taint
from traceconf.sass.memory import _registers, address_reader
from traceconf.sass.opcodes import element_of
from traceconf.sass.operands import Operand, SassContext, read_register, write_register

U64 = np.uint64
M32 = U64(0xFFFF_FFFF)


class LocalMemory:
    """Each thread's local memory: 4-byte word address → (values, taints), one element per thread."""

    def __init__(self, size: int):
        self.size = size
        self.words: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def forget(self, lanes: np.ndarray) -> None:
        """``lanes`` may have stored anywhere in their local memory: every word of theirs is unknown."""
        for values, bits in self.words.values():
            bits[lanes] |= taint.LOADED

    def load(self, address: int):
        """(values, taints) of the word at ``address`` (unknown where never stored)."""
        stored = self.words.get(address)
        if stored is None:
            return np.zeros(self.size, dtype=np.uint64), np.full(self.size, taint.LOADED, dtype=np.uint64)
        return stored

    def store(self, address: int, lanes: np.ndarray, values, bits) -> None:
        stored = self.words.get(address)
        if stored is None:
            stored = (np.zeros(self.size, dtype=np.uint64), np.full(self.size, taint.LOADED, dtype=np.uint64))
            self.words[address] = stored
        stored[0][lanes] = np.broadcast_to(values, (self.size,))[lanes]
        stored[1][lanes] = np.broadcast_to(bits, (self.size,))[lanes]


def local_memory(ops: list[Operand], mods: list[str], ctx: SassContext, loads: bool):
    """``LDL[.U8|.S16|.64|.128] Rd, [a]`` / ``STL[...] [a], Rs`` over the thread's :class:`LocalMemory`."""
    where = next((i for i, op in enumerate(ops) if op.kind == "address"), None)
    register = ops[0] if loads else (ops[where + 1] if where is not None and where + 1 < len(ops) else None)
    if where is None or register is None or register.kind != "reg":
        return None
    address = address_reader(ops[where], ctx, wide_base=False)
    width, signed, _ = element_of(mods)
    names = _registers(register, max(1, width // 4))

    def run(m, mask):
        lanes = m.valid if mask is None else mask
        if not lanes.any():
            return
        memory = m.local_memory()
        value, bits = address(m)
        value = np.broadcast_to(np.asarray(value, dtype=np.uint64), (m.size,))
        bits = np.broadcast_to(bits, (m.size,))
        unknown = lanes & ((bits & taint.UNKNOWN) != 0)
        if unknown.any():
            if not loads:
                memory.forget(unknown)          # a store to an unknown place: any word of theirs may have changed
            for name in names if loads else ():
                write_register(m, name, U64(0), taint.LOADED | bits, unknown)
        known = lanes & ~unknown
        for start in np.unique(value[known]):
            at = known & (value == start)
            for index, name in enumerate(names):
                _word(memory, m, int(start) + 4 * index, width, signed, name, at, loads)
    return run


def _word(memory: LocalMemory, m, address: int, width: int, signed: bool, name: str, lanes: np.ndarray,
          loads: bool) -> None:
    """Load or store one register at ``address`` (a byte or half-word of a word for widths below 4)."""
    word, shift = address & ~3, U64(8 * (address & 3))
    values, bits = memory.load(word)
    if width >= 4:
        if loads:
            write_register(m, name, values, bits, lanes)
        else:
            memory.store(word, lanes, *_pair(read_register(m, name), m.size))
        return
    field = U64((1 << 8 * width) - 1)
    if loads:
        part = (values >> shift) & field
        if signed:
            sign = U64(1 << (8 * width - 1))
            part = np.where(part & sign, part | (M32 & ~field), part)
        write_register(m, name, part, bits, lanes)
        return
    new, new_bits = _pair(read_register(m, name), m.size)
    memory.store(word, lanes, (values & ~(field << shift) & M32) | ((new & field) << shift), bits | new_bits)


def _pair(read, size: int):
    value, bits = read
    return (np.broadcast_to(np.asarray(value, dtype=np.uint64), (size,)),
            np.broadcast_to(np.asarray(bits, dtype=np.uint64), (size,)))
