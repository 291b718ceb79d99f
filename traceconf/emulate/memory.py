"""Compile memory instructions: record shared-memory accesses, pass parameters, taint loaded values.

Shared accesses are recognised three ways: the instruction names the shared
state space (``ld.shared``, ``atom.shared::cta``, ``cp.async...shared.global``,
``ldmatrix...shared``); or it names none (generic) and the address of a lane
was derived from the shared window (:data:`taint.SHARED_WINDOW`, set by
``cvta.shared``), in which case that lane is a shared access at
``address - SHARED_WINDOW_BASE``; other lanes of a generic access go to
global memory and are not recorded.

Every value read from memory carries :data:`taint.LOADED`.  The parameter
space is the exception: kernel parameters have the launch's values, and
``st.param``/``ld.param`` between caller and inlined callee go through the
per-thread parameter store.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import intops, taint
from traceconf.emulate.alu import SHARED_WINDOW_BASE, unknown_result
from traceconf.emulate.intops import TYPE_BITS
from traceconf.emulate.operands import Context, address_reader, param_symbol, reader, register_key, \
    split_destinations
from traceconf.emulate.program import Slot
from traceconf.ptx.opcodes import SHARED_ACCESS_KINDS, uncounted_shared_op
from traceconf.schemas import KIND_CODES

U64 = np.uint64
SPACES = ("shared", "global", "local", "param", "const", "tex", "surf")
MATRIX_COUNTS = {"x1": 1, "x2": 2, "x4": 4}
SHARED_OFFSET_MASK = U64(0xFFFF_FFFF)   # shared-window offsets are 32-bit


def space_of(row: dict) -> str:
    """State space named by the instruction ('generic' when none is)."""
    for modifier in row["modifiers"] or []:
        root = modifier.split("::")[0]
        if root in SPACES:
            return root
    space = row.get("state_space")
    return space if space and space != "generic" else "generic"


def access_bytes(row: dict) -> int:
    if row.get("access_bytes"):
        return int(row["access_bytes"])
    kind = row.get("type") or "b32"
    return max(1, TYPE_BITS.get(kind, 32) // 8) * int(row.get("vector") or 1)


def _address_operand(row: dict) -> int | None:
    for index, operand in enumerate(row["operands"] or []):
        if operand["kind"] == "address":
            return index
    return None


def _loaded_destinations(row: dict, slot: Slot):
    """Writer that gives every destination register an unknown, loaded value."""
    keys = [register_key(n, slot) for n in split_destinations(row["operands"][0]) if n and n != "_"]

    def write(m, mask, extra=taint.ZERO):
        for key in keys:
            m.write(key, U64(0), taint.LOADED | extra, mask)
    return write


def _shared_access(slot: Slot, ctx: Context, address_index: int, kind: str, size: int, generic: bool,
                   matrices: int = 0):
    """``record(m, mask)``: log one warp-level shared access per warp with an active lane."""
    address = address_reader(slot.row["operands"][address_index], slot, ctx)
    kind_code = KIND_CODES[kind]
    base = U64(SHARED_WINDOW_BASE[ctx.address_bits])
    row_lanes = 8 * matrices              # ldmatrix/stmatrix: lanes 0..8m-1 give the row addresses

    def record(m, mask):
        value, bits = address(m)
        lanes = m.valid if mask is None else mask
        if row_lanes:
            lanes = lanes & (m.lane < row_lanes)
        bits = m.full(bits)
        if generic:
            lanes = lanes & ((bits & taint.SHARED_WINDOW) != 0)
            value = m.full(value) - base
            if not lanes.any():
                return
        if m.address_unknown(slot, int(np.bitwise_or.reduce(bits[lanes] if lanes is not m.valid else bits)),
                             "address"):
            return
        offsets = (m.full(value) & SHARED_OFFSET_MASK).view(np.int64)
        m.record_access(slot, kind_code, size, matrices, offsets, lanes)
    return record


def compile_memory(slot: Slot, ctx: Context):
    """``run(state, mask)`` for a memory instruction, or None when the opcode is not one."""
    row = slot.row
    opcode = row["opcode"]
    modifiers = row["modifiers"] or []
    handler = _HANDLERS.get(opcode)
    if handler is None:
        return None
    return handler(slot, ctx, row, modifiers)


def _load(slot, ctx, row, modifiers):
    space = space_of(row)
    address_index = _address_operand(row)
    if space == "param":
        return _load_param(slot, ctx, row)
    write = _loaded_destinations(row, slot)
    if space not in ("shared", "generic") or address_index is None or row["opcode"] not in SHARED_ACCESS_KINDS:
        return lambda m, mask: write(m, mask)        # ldu reads global memory only
    record = _shared_access(slot, ctx, address_index, SHARED_ACCESS_KINDS[row["opcode"]], access_bytes(row),
                            generic=space == "generic")

    def run(m, mask):
        record(m, mask)
        write(m, mask)
    return run


def _store(slot, ctx, row, modifiers):
    space = space_of(row)
    address_index = _address_operand(row)
    if space == "param":
        return _store_param(slot, ctx, row)
    if space not in ("shared", "generic") or address_index is None:
        return lambda m, mask: None
    return _shared_access(slot, ctx, address_index, SHARED_ACCESS_KINDS[row["opcode"]], access_bytes(row),
                          generic=space == "generic")


def _atomic(slot, ctx, row, modifiers):
    space = space_of(row)
    address_index = _address_operand(row)
    has_result = row["opcode"] == "atom"
    write = _loaded_destinations(row, slot) if has_result else None
    if space not in ("shared", "generic") or address_index is None:
        return (lambda m, mask: write(m, mask)) if write else (lambda m, mask: None)
    record = _shared_access(slot, ctx, address_index, SHARED_ACCESS_KINDS[row["opcode"]], access_bytes(row),
                            generic=space == "generic")

    def run(m, mask):
        record(m, mask)
        if write:
            write(m, mask)
    return run


def _matrix(slot, ctx, row, modifiers):
    matrices = next((MATRIX_COUNTS[m] for m in modifiers if m in MATRIX_COUNTS), 1)
    space = space_of(row)
    address_index = _address_operand(row)
    kind = SHARED_ACCESS_KINDS[row["opcode"]]
    record = _shared_access(slot, ctx, address_index, kind, 16, generic=space == "generic", matrices=matrices)
    if kind == "stmatrix":
        return record
    write = _loaded_destinations(row, slot)

    def run(m, mask):
        record(m, mask)
        write(m, mask)
    return run


def _copy(slot, ctx, row, modifiers):
    """cp.async (per-thread copies global -> shared); bulk/tensor copies are not per-lane accesses."""
    if "async" not in modifiers:
        return lambda m, mask: None
    uncounted = uncounted_shared_op(row["opcode"], modifiers)
    if uncounted:
        return lambda m, mask: m.report_unresolved(slot, uncounted[1])
    spaces = [m.split("::")[0] for m in modifiers if m.split("::")[0] in SPACES]
    operands = row["operands"] or []
    # commit_group / wait_group / wait_all name no state space: they move no data.
    if not operands or not spaces or spaces[0] != "shared":
        return lambda m, mask: None
    size_operand = operands[2] if len(operands) > 2 else None
    size = int(size_operand["value"]) if size_operand and size_operand["kind"] == "imm" else access_bytes(row)
    return _shared_access(slot, ctx, 0, SHARED_ACCESS_KINDS[row["opcode"]], size, generic=False)


def _mbarrier(slot, ctx, row, modifiers):
    """mbarrier waits are modelled as completed (a correct program gets past them); the rest is opaque."""
    if any(m in ("try_wait", "test_wait") for m in modifiers):
        keys = [register_key(n, slot) for n in split_destinations(row["operands"][0])]

        def done(m, mask):
            for key in keys:
                m.write(key, U64(1), taint.ZERO, mask)
        return done
    return unknown_result(row, slot, ctx, taint.UNMODELLED)


def _texture(slot, ctx, row, modifiers):
    write = _loaded_destinations(row, slot)
    return lambda m, mask: write(m, mask)


# --------------------------------------------------------------------------- parameter space


def _param_location(row: dict, slot: Slot):
    operand = row["operands"][_address_operand(row)]
    return operand.get("name"), int(operand.get("value") or 0)


def _load_param(slot, ctx, row):
    name, offset = _param_location(row, slot)
    keys = [register_key(n, slot) if n != "_" else None for n in split_destinations(row["operands"][0])]
    bits = TYPE_BITS.get(row.get("type") or "b32", 32)
    size = max(1, bits // 8)
    if name is None or name.startswith("%"):
        # a parameter reached through a register (its address was taken): not modelled
        return unknown_result(row, slot, ctx, taint.UNMODELLED)
    symbol = param_symbol(name, slot)
    if symbol in ctx.param_names:
        return _load_kernel_param(ctx, symbol, offset, keys, bits, size)

    def run(m, mask):
        for index, key in enumerate(keys):
            if key is None:
                continue
            value, taint_bits = m.load_param(symbol, offset + index * size, size)
            m.write(key, intops.truncate(value, bits), taint_bits, mask)
    return run


def _load_kernel_param(ctx: Context, name: str, offset: int, keys, bits: int, size: int):
    index = ctx.param_names.index(name)
    known = name in ctx.param_values
    raw = ctx.param_values.get(name, 0) % (1 << (8 * max(ctx.param_bytes.get(name) or 8, 8)))
    values = []
    for position, key in enumerate(keys):
        start = offset + position * size
        if known:
            values.append((key, U64((raw >> (8 * start)) & ((1 << bits) - 1)), taint.ZERO))
        else:
            values.append((key, U64(0), taint.missing_param(index)))

    def run(m, mask):
        for key, value, taint_bits in values:
            if key is not None:
                m.write(key, value, taint_bits, mask)
    return run


def _store_param(slot, ctx, row):
    name, offset = _param_location(row, slot)
    symbol = param_symbol(name, slot) if name else None
    source = row["operands"][1]
    bits = TYPE_BITS.get(row.get("type") or "b32", 32)
    size = max(1, bits // 8)
    names = source["elements"] if source["kind"] == "vector" else [None]
    readers = [reader({"kind": "reg", "name": n}, slot, ctx) for n in names] if source["kind"] == "vector" \
        else [reader(source, slot, ctx)]

    def run(m, mask):
        if symbol is None:
            return
        for index, read in enumerate(readers):
            value, taint_bits = read(m)
            m.store_param(symbol, offset + index * size, intops.truncate(value, bits), taint_bits, size, mask)
    return run


_HANDLERS = {
    "ld": _load, "ldu": _load, "st": _store, "atom": _atomic, "red": _atomic,
    "ldmatrix": _matrix, "stmatrix": _matrix, "cp": _copy,
    "mbarrier": _mbarrier, "tex": _texture, "tld4": _texture, "suld": _texture, "sured": _texture,
}
