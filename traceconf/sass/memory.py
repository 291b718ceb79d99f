"""SASS memory instructions: shared accesses recorded per warp, everything else gives loaded values.

``LDS``/``STS``/``ATOMS``/``LDSM``/``STSM``/``LDGSTS`` always address the shared window; generic
``LD``/``ST``/``ATOM``/``RED`` do for the lanes whose address came from it (``SR_SWINHI``).  Width, kind
and matrix count come from :func:`traceconf.sass.opcodes.shared_op`.
"""

from __future__ import annotations

import numpy as np

from traceconf.emulate import taint
from traceconf.sass.opcodes import ALWAYS, shared_op
from traceconf.sass.operands import Operand, SassContext, pair_name, reader, write_register

U64 = np.uint64


def address_reader(op: Operand, ctx: SassContext, wide_base: bool):
    """Per-thread address of ``[R2+UR4+0x10]`` (register terms scaled by .X4 etc.)."""
    terms = [(reader(Operand("reg", name, name=name, wide=wide or wide_base), ctx), scale)
             for name, scale, wide in op.registers]
    offset = U64(op.value & 0xFFFF_FFFF_FFFF_FFFF)

    def read(m):
        total, bits = offset, taint.ZERO
        for term, scale in terms:
            value, b = term(m)
            total = total + np.asarray(value, dtype=np.uint64) * U64(scale)
            bits = bits | b
        return total, bits
    return read


def _loaded(destinations: list[Operand], count: int):
    """Writer giving ``count`` registers from the first destination on an unknown, loaded value."""
    names = []
    for op in destinations:
        if op.kind == "reg" and op.name not in ("RZ", "URZ"):
            base = op.name
            names.append(base)
            for _ in range(count - 1):
                base = pair_name(base)
                names.append(base)
        elif op.kind == "pred":
            names.append(op.name)

    def write(m, mask):
        for name in names:
            write_register(m, name, U64(0), taint.LOADED, mask)
    return write


def shared_memory(opcode: str, ops: list[Operand], mods: list[str], ctx: SassContext, slot):
    op = shared_op(opcode)
    address_index = next((i for i, o in enumerate(ops) if o.kind == "address"), None)
    if op is None or address_index is None:
        return None
    address = ops[address_index]
    generic = op.space != ALWAYS and op.kind != "cp_async"
    # LDGSTS [shared], [global]: the shared side is the first address operand
    read = address_reader(address, ctx, wide_base=generic and any(w for *_, w in address.registers))
    kind_code, op_code = op.kind_code, op.op_code
    matrices = op.matrices
    row_lanes = 8 * matrices
    destinations = ops[:address_index] if op.kind in ("ld", "ldmatrix", "atom") else []
    registers_written = max(1, op.bytes // 4) if op.kind == "ld" else (matrices if op.kind == "ldmatrix" else
                                                                       max(1, op.bytes // 4))
    write_loaded = _loaded(destinations, registers_written) if destinations else None
    window = U64(ctx.window_high) << U64(32)
    base = U64(ctx.shared_base)

    def run(m, mask):
        value, bits = read(m)
        lanes = m.valid if mask is None else mask
        if row_lanes:
            lanes = lanes & (m.lane < row_lanes)
        bits = m.full(bits)
        value = m.full(value)
        if generic:
            lanes = lanes & ((bits & taint.SHARED_WINDOW) != 0)
            value = value - window
        if lanes.any():
            selected = bits[lanes] if lanes is not m.valid else bits
            if not m.address_unknown(slot, int(np.bitwise_or.reduce(selected)), "address"):
                raw = (value & U64(0xFFFF_FFFF)).view(np.int64)
                # the reserved window start maps to byte 0; an address inside the reserved part stays as is
                offsets = np.where(raw >= int(base), raw - int(base), raw)
                m.record_access(slot, kind_code, op.bytes, matrices, offsets, lanes, op_code)
        if write_loaded:
            write_loaded(m, mask)
    return run


def other_memory(ops, mods, loads: bool):
    if not loads:
        return lambda m, mask: None
    address_index = next((i for i, o in enumerate(ops) if o.kind == "address"), len(ops))
    widths = [int(x) for x in mods if x in ("64", "128")]
    count = max(1, (widths[0] // 32) if widths else 1)
    write = _loaded(ops[:max(1, address_index)] if address_index else ops[:1], count)
    return write
