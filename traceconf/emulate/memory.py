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
from traceconf.emulate.allocation import value_without_param
from traceconf.emulate.alu import SHARED_WINDOW_BASE, unknown_result
from traceconf.emulate.contents import ATOMIC_OPS, atomic, module_globals_holding
from traceconf.emulate.intops import FLOAT_TYPES, SIGNED_TYPES, TYPE_BITS
from traceconf.emulate.operands import Context, address_reader, param_symbol, reader, register_key, \
    split_destinations
from traceconf.emulate.program import Slot
from traceconf.emulate.regions import NO_DESTINATION
from traceconf.emulate.spaces import SPACES, space_of
from traceconf.emulate.speculation import check_nothing_stored
from traceconf.ptx.opcodes import SHARED_ACCESS_KINDS, uncounted_shared_op
from traceconf.ptx.wmma import TYPE_BITS as WMMA_TYPE_BITS, WMMA_NOTE, default_stride, lowering, wmma_access
from traceconf.schemas import KIND_CODES, OP_CODES

U64 = np.uint64
MATRIX_COUNTS = {"x1": 1, "x2": 2, "x4": 4}
SHARED_OFFSET_MASK = U64(0xFFFF_FFFF)   # shared-window offsets are 32-bit


def access_bytes(row: dict) -> int:
    if row.get("access_bytes"):
        return int(row["access_bytes"])
    kind = row.get("type") or "b32"
    return max(1, TYPE_BITS.get(kind, 32) // 8) * int(row.get("vector") or 1)


def address_operand(row: dict) -> int | None:
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


def _locate(slot: Slot, ctx: Context, address_index: int, space: str):
    """``locate(m, mask)`` -> (shared lanes, shared offsets, global lanes, addresses, address taints).

    A generic address is shared in the lanes whose value came from the shared window, global elsewhere."""
    address = address_reader(slot.row["operands"][address_index], slot, ctx)
    base = U64(SHARED_WINDOW_BASE[ctx.address_bits])
    generic = space == "generic"
    shared = space == "shared"

    def locate(m, mask):
        value, bits = address(m)
        lanes = m.valid if mask is None else mask
        value, bits = m.full(value), m.full(bits)
        if generic:
            window = (bits & taint.SHARED_WINDOW) != 0
            offsets = ((value - base) & SHARED_OFFSET_MASK).view(np.int64)
            return lanes & window, offsets, lanes & ~window, value, bits
        if shared:
            return lanes, (value & SHARED_OFFSET_MASK).view(np.int64), None, value, bits
        return None, None, lanes, value, bits
    return locate


def _shared_access(slot: Slot, ctx: Context, address_index: int, kind: str, size: int, generic: bool,
                   matrices: int = 0, op: str | None = None):
    """``record(m, mask)``: log one warp-level shared access per warp with an active lane."""
    locate = _locate(slot, ctx, address_index, "generic" if generic else "shared")
    recorder = _recorder(slot, kind, size, matrices, op)

    def record(m, mask):
        lanes, offsets, _, _, bits = locate(m, mask)
        recorder(m, lanes, offsets, bits)
    return record


def _recorder(slot: Slot, kind: str, size: int, matrices: int = 0, op: str | None = None):
    """``record(m, lanes, offsets, bits)`` of located shared lanes: warps with an unknown lane are unresolved."""
    kind_code = KIND_CODES[kind]
    op_code = OP_CODES[op] if op else 0
    row_lanes = 8 * matrices              # ldmatrix/stmatrix: lanes 0..8m-1 give the row addresses

    def record(m, lanes, offsets, bits, copy=None):
        if lanes is None:
            return
        if row_lanes:
            lanes = lanes & (m.lane < row_lanes)
        if lanes is not m.valid and not lanes.any():
            return
        lanes = m.known_lanes(slot, lanes, bits, "address")
        if lanes is None:
            return
        m.record_access(slot, kind_code, size, matrices, offsets, lanes, op_code, copy)
    return record


def copy_reads(m, slot: Slot, lanes: np.ndarray, value, bits, reads, known, size):
    """ACCESSES (``source``, ``src_size``) per thread of a copy whose lanes ``lanes`` read global ``value`` (taint
    ``bits``), at both levels: a lane reads its source where ``reads`` (its ignore-src operand false, its src-size
    above 0), ``size`` bytes (per lane, or one for all), and zero-fills elsewhere (src_size 0, no source); -1
    where ``known`` is false (the operand deciding it is unknown) and for the source where it is unknown."""
    source = m.copy_sources(slot, value, bits, lanes & known & reads)
    return source, np.where(lanes & known, np.where(reads, size, 0), -1)


def _copy_with_sources(slot: Slot, ctx: Context, kind: str, size: int, op: str = "bypass", operand=None,
                       ignore_src: bool = False):
    """``record(m, mask)`` of a cp.async.cg: the shared access with each lane's global source address (operand
    1), -1 where unknown (ACCESSES ``source``), and with a src-size or ignore-src ``operand`` the bytes each lane
    reads from it (``src_size``, :func:`_lanes_reading`).  A .ZFILL copy whose src-size is a register leaves
    out, unresolved, the executions where a lane zero-fills (:func:`_zero_fills_nsight_may_count`)."""
    destination = _locate(slot, ctx, 0, "shared")
    source = _locate(slot, ctx, 1, "global")
    recorder = _recorder(slot, kind, size, 0, op)
    reading = _lanes_reading(operand, slot, ctx, size, ignore_src)
    misread_on_p0 = op == "bypass_zfill" and operand is not None and operand["kind"] != "imm"

    def record(m, mask):
        lanes, offsets, _, _, bits = destination(m, mask)
        *_, value, source_bits = source(m, mask)
        if reading is None:
            copy = (m.copy_sources(slot, value, source_bits, lanes), None)
        else:
            reads, known, read_bytes = reading(m)
            if misread_on_p0:
                lanes = _zero_fills_nsight_may_count(m, slot, lanes, known & ~reads)
            copy = copy_reads(m, slot, lanes, value, source_bits, reads, known, read_bytes)
        recorder(m, lanes, offsets, bits, copy)
    return record


#: Why the PTX level leaves out an execution of a .ZFILL copy (cp.async.cg with a src-size register) where a lane
#: zero-fills: Nsight's count of it depends on a predicate register the PTX does not name (docs/rules.md, "A guard
#: on P0"; ldgsts.cu's src-size 0 launches, tests/test_hw_validation.py).
ZFILL_ON_P0_REASON = ("lanes with src-size 0: ptxas tests src-size != 0 in a predicate register the PTX does not "
                      "name, and Nsight counts them as reading 16 bytes where that register is P0 (it reads P0 as "
                      "true in LDGSTS.ZFILL), as zero-filling elsewhere; the SASS level (the default) reads the "
                      "register ptxas picked")


def _zero_fills_nsight_may_count(m, slot: Slot, lanes: np.ndarray, filling: np.ndarray) -> np.ndarray:
    """``lanes`` without the warps where some lane zero-fills (``filling``: src-size 0, known), reported
    unresolved: Nsight counts those lanes as reading 16 bytes or as zero-filling as ptxas's register allocation
    decides, so the accesses it counts are one or the other.  Where no lane zero-fills, the lanes read their
    src-size in both readings: the execution is counted."""
    warps = (lanes & filling).reshape(-1, m.warp_size).any(axis=1)
    if not warps.any():
        return lanes
    m.report_unresolved(slot, ZFILL_ON_P0_REASON, warps)
    return lanes & ~np.repeat(warps, m.warp_size)


def _lanes_reading(operand: dict | None, slot: Slot, ctx: Context, size: int, ignore_src: bool):
    """``reading(m)`` -> (reads, known, bytes) per thread of a cp.async.cg's fourth operand: an ignore-src
    predicate (``ignore_src``: the lane reads ``size`` bytes where it is false) or a src-size (it reads that
    many, none at 0); None without one."""
    if operand is None:
        return None
    read = reader(operand, slot, ctx)

    def reading(m):
        value, bits = read(m)
        value, known = m.full(value), (m.full(bits) & taint.UNKNOWN) == 0
        if ignore_src:
            return (value & U64(1)) == 0, known, size
        value = value & U64(0xFFFF_FFFF)
        return value != 0, known, np.minimum(value, U64(size)).astype(np.int64)
    return reading


def _writers(program, key: str) -> list[dict]:
    """The rows of the instructions of ``program`` that write register ``key``."""
    return [slot.row for slot in program.slots if (slot.row["operands"] or [{}])[0].get("kind") == "reg"
            and slot.row["opcode"] not in NO_DESTINATION
            and key in (register_key(n, slot) for n in split_destinations(slot.row["operands"][0]))]


def compile_memory(slot: Slot, ctx: Context):
    """``run(state, mask)`` for a memory instruction, or None when the opcode is not one."""
    row = slot.row
    opcode = row["opcode"]
    modifiers = row["modifiers"] or []
    handler = _HANDLERS.get(opcode)
    if handler is None:
        return None
    return handler(slot, ctx, row, modifiers)


def _element(row: dict) -> tuple[int, bool, bool]:
    """(bytes, signed, float) of one element of a load/store/atomic."""
    kind = row.get("type") or "b32"
    return max(1, TYPE_BITS.get(kind, 32) // 8), kind in SIGNED_TYPES, kind in FLOAT_TYPES


def _sign_extend(values: np.ndarray, size: int) -> np.ndarray:
    return intops.bits_of(intops.signed(values, 8 * size)) if size < 8 else values


class Reads:
    """Values of ``count`` consecutive elements read by the located lanes (unknown where nothing is known)."""

    def __init__(self, m, count: int):
        self.values = [m.full(U64(0))] * count          # never modified in place: shared is fine
        self.bits = [m.full(taint.LOADED)] * count

    def put(self, index: int, lanes: np.ndarray, values: np.ndarray, bits: np.ndarray) -> None:
        self.values[index] = np.where(lanes, values, self.values[index])
        self.bits[index] = np.where(lanes, bits, self.bits[index])


def _read_memory(m, ctx: Context, slot: Slot, located, count: int, size: int, is_signed: bool) -> Reads:
    shared_lanes, offsets, global_lanes, address, bits = located
    reads = Reads(m, count)
    known = (bits & taint.UNKNOWN) == 0
    if shared_lanes is not None:
        lanes = shared_lanes & known
        if global_lanes is None and count == 1 and (lanes is m.valid or lanes.all()):
            # every thread reads shared memory at a known address: no per-lane selection needed
            every = m.shared_contents().load_every(m.shared_base(), offsets, size)
            if every is not None:
                values, content_bits = every
                reads.values[0] = _sign_extend(values, size) if is_signed else values
                reads.bits[0] = taint.read_back(content_bits) | taint.THREAD
                return reads
        if lanes.any():
            contents = m.shared_contents()
            for index in range(count):
                values, content_bits = contents.load(m.cta_index, offsets + index * size, size, lanes)
                reads.put(index, lanes, _sign_extend(values, size) if is_signed else values,
                          taint.read_back(content_bits) | taint.THREAD)
    if global_lanes is not None:
        read_global(m, ctx, slot, reads, global_lanes, address, bits, size, is_signed, slot.row.get("type") or "b32")
    located_by_cta(m, reads, bits)
    return reads


def located_by_cta(m, reads: Reads, bits) -> None:
    """Reads at an address that depends on the CTA index are opaque in it: whether a lane reads a known value
    at all (written bytes, a --data buffer) may change with the CTA."""
    by_cta = m.full(bits) & taint.CTA_ANY
    if by_cta.any():
        reads.bits = [np.where(by_cta != 0, b | taint.CTA | taint.CTA_OPAQUE, b) for b in reads.bits]


def read_global(m, ctx, slot: Slot, reads: Reads, lanes: np.ndarray, address: np.ndarray, bits: np.ndarray,
                size: int, is_signed: bool, type_name: str, exact_type: bool = True) -> None:
    """What the global ``lanes`` read, element after element (``size`` bytes each, ``len(reads.values)`` of them),
    put into ``reads``: the bytes of the --data buffer the address lies in; unknown elsewhere, noted with the
    pointer parameter named (the PTX and SASS levels both read global memory here).  ``exact_type``: the
    type name says integer or float (PTX); False where only its width is known (SASS ``LDG.E.U16``)."""
    known = (bits & taint.UNKNOWN) == 0
    if ctx.memory is not None:
        served_lanes = lanes & known
        if served_lanes.any():
            row = slot.row
            wrong = ctx.memory.mismatch(address, served_lanes, type_name, exact_type)
            if wrong is not None:
                raise m._error(row, f"kernel {ctx.kernel}: {m.where(row)} reads .{type_name} values from parameter "
                                    f"{wrong.name}, but --data gives it {wrong.dtype.name} elements "
                                    f"({wrong.description})")
            for index in range(len(reads.values)):
                values, content_bits, served, past = ctx.memory.load(address + U64(index * size), size, served_lanes)
                if past is not None:
                    buffer, offset = past
                    raise m._error(row, f"kernel {ctx.kernel}: {m.where(row)} reads bytes {offset}..{offset + size - 1} "
                                        f"of parameter {buffer.name}, but --data gives it only {len(buffer.data)} "
                                        f"bytes ({buffer.description})")
                reads.put(index, served, _sign_extend(values, size) if is_signed else values,
                          taint.read_back(content_bits | (taint.CTA if ctx.memory.written else taint.ZERO))
                          | taint.THREAD)
                _note_unserved(m, ctx, slot, served_lanes & ~served, bits)
    if ctx.memory is None or not (lanes & known).all():
        _note_unserved(m, ctx, slot, lanes & ~known if ctx.memory is not None else lanes, bits)


def global_without_data(address, ctx, write):
    """A global load or atomic with no --data at all (either level; ``address``: its reader): unknown values;
    the first execution notes which pointer parameters the kernel reads through and which module globals
    (named in the reasons of what the values make unresolved)."""
    noted = []

    def run(m, mask):
        if not noted:
            noted.append(True)
            value, bits = address(m)
            note_reads_without_data(m, ctx, m.spread(value), m.spread(bits))    # a taint may be one scalar
        write(m, mask)
    return run


def note_reads_without_data(m, ctx, address: np.ndarray, bits: np.ndarray) -> None:
    """Name, for the reasons, the pointer parameters and module globals (``__device__`` variables: their
    addresses are known, their contents followed only with --data) global memory is read through."""
    address, bits = np.broadcast_arrays(address, bits)      # a taint may be one scalar for every thread
    known = address[(bits & taint.UNKNOWN) == 0]
    m.findings.loads_through(taint.missing_params(int(np.bitwise_or.reduce(bits)), ctx.param_names),
                             module_globals_holding(ctx.globals, known))


def _note_unserved(m, ctx, slot: Slot, lanes: np.ndarray, bits: np.ndarray) -> None:
    if ctx.memory is None or not lanes.any():
        return
    m.findings.loads_through(taint.missing_params(int(np.bitwise_or.reduce(bits[lanes])), ctx.param_names))
    row = slot.row
    if row["instruction"] in ctx.memory.unserved:
        return
    missing = taint.missing_params(int(np.bitwise_or.reduce(bits[lanes])), ctx.param_names)
    through = f"through parameter{'s' if len(missing) > 1 else ''} {', '.join(missing)}, which ha" \
        f"{'ve' if len(missing) > 1 else 's'} no --data" if missing else "outside every --data buffer"
    ctx.memory.unserved[row["instruction"]] = f"{m.where(row)} reads global memory {through}"


def _write_memory(m, ctx: Context, located, values: list, value_bits: list, size: int) -> None:
    shared_lanes, offsets, global_lanes, address, bits = located
    unknown = (bits & taint.UNKNOWN) != 0
    if shared_lanes is not None and ctx.shared_values and shared_lanes.any():
        contents = m.shared_contents()
        lanes = shared_lanes & ~unknown
        for index, (value, vbits) in enumerate(zip(values, value_bits)):
            contents.store(m.cta_index, offsets + index * size, size, value, vbits | (bits & taint.CTA_ANY), lanes)
        if (shared_lanes & unknown).any():          # could have written any byte of its CTA
            contents.forget(m.cta_index[shared_lanes & unknown])
    if global_lanes is not None:
        write_global(ctx, global_lanes, address, bits, values, value_bits, size)


def write_global(ctx, lanes: np.ndarray, address: np.ndarray, bits: np.ndarray, values: list, value_bits: list,
                 size: int) -> None:
    """Global ``lanes`` store ``values`` (consecutive elements of ``size`` bytes) into the --data buffers their
    addresses lie in (both levels store here); a store through an unknown pointer may have hit any of them."""
    if ctx.memory is None or not lanes.any():
        return
    known = lanes & ((bits & taint.UNKNOWN) == 0)
    for index, (value, vbits) in enumerate(zip(values, value_bits)):
        ctx.memory.store(address + U64(index * size), size, value, vbits | (bits & taint.CTA_ANY), known)
    # a pointer without a value is a buffer without --data: distinct from every given buffer
    forget_if_wild(ctx, lanes, bits)


def forget_if_wild(ctx, lanes: np.ndarray, bits: np.ndarray) -> None:
    """A write through an address unknown for another reason than a pointer without --data may have changed
    any --data buffer: their contents become unknown."""
    if (lanes & ((bits & taint.WILD) != 0)).any():
        ctx.memory.forget()


def _load(slot, ctx, row, modifiers):
    space = space_of(row)
    address_index = address_operand(row)
    if space == "param":
        return _load_param(slot, ctx, row)
    write = _loaded_destinations(row, slot)
    if space == "global" and ctx.memory is None and address_index is not None:
        return global_without_data(address_reader(row["operands"][address_index], slot, ctx), ctx, write)
    if space not in ("shared", "generic", "global") or address_index is None:
        return lambda m, mask: write(m, mask)        # local, const, texture: contents not modelled
    keys = [register_key(n, slot) if n and n != "_" else None for n in split_destinations(row["operands"][0])]
    size, is_signed, _ = _element(row)
    locate = _locate(slot, ctx, address_index, space)
    shared_kind = SHARED_ACCESS_KINDS.get(row["opcode"]) if space != "global" else None
    recorder = _recorder(slot, shared_kind, access_bytes(row)) if shared_kind else None
    if ctx.relevant_registers is not None and not any(key in ctx.relevant_registers for key in keys if key):
        # nothing this load reads can reach an address, a condition or modelled memory: skip the read
        if recorder is None:
            return lambda m, mask: write(m, mask)

        def record_only(m, mask):
            located = locate(m, mask)
            recorder(m, located[0], located[1], located[4])
            m.contents_of(slot)         # (asked: what it does with contents is already nothing)
            write(m, mask)
        return record_only

    def run(m, mask):
        located = locate(m, mask)
        if recorder is not None:
            recorder(m, located[0], located[1], located[4])
        if _assumed_undone(m, ctx, slot, located, len(keys) * size, stores=False):
            return
        reads = _read_memory(m, ctx, slot, located, len(keys), size, is_signed)
        for key, value, bits in zip(keys, reads.values, reads.bits):
            if key is not None:
                m.write(key, value, bits, mask)
    return run


def _assumed_undone(m, ctx: Context, slot: Slot, located, size: int, stores: bool) -> bool:
    """Whether the launch's assumptions (:mod:`traceconf.emulate.speculation`) leave the contents work of this
    access (``size`` bytes per lane; ``stores``: it may write) undone, after checking that its lanes stay where
    they assume; what an undone store does without its values (an unknown address forgets) is done here."""
    shared_lanes, offsets, global_lanes, address, bits = located
    assumed = m.contents_checked(slot, offsets, size,
                                 lambda: np.flatnonzero(shared_lanes & ((bits & taint.UNKNOWN) == 0)))
    if assumed is None:
        return False
    if assumed.nothing_stored:
        check_nothing_stored(ctx.memory, global_lanes, address, bits, size)
    elif assumed.skip and stores and ctx.shared_values:
        unknown = shared_lanes & ((bits & taint.UNKNOWN) != 0)
        if unknown.any():                  # could have written any byte of its CTA
            m.shared_contents().forget(m.cta_index[unknown])
    return assumed.skip


def _sources_of(operand: dict, slot: Slot, ctx: Context) -> list:
    if operand["kind"] == "vector":
        return [reader({"kind": "reg", "name": n}, slot, ctx) for n in operand["elements"] or []]
    return [reader(operand, slot, ctx)]


def _store(slot, ctx, row, modifiers):
    space = space_of(row)
    address_index = address_operand(row)
    if space == "param":
        return _store_param(slot, ctx, row)
    if space not in ("shared", "generic", "global") or address_index is None or \
            (space == "global" and ctx.memory is None):
        return lambda m, mask: None
    size, _, _ = _element(row)
    sources = _sources_of(row["operands"][address_index + 1], slot, ctx) if len(row["operands"]) > address_index + 1 \
        else []
    locate = _locate(slot, ctx, address_index, space)
    recorder = _recorder(slot, SHARED_ACCESS_KINDS[row["opcode"]], access_bytes(row)) if space != "global" else None

    def run(m, mask):
        located = locate(m, mask)
        if recorder is not None:
            recorder(m, located[0], located[1], located[4])
        if located[0] is None and ctx.memory is None:
            return
        if _assumed_undone(m, ctx, slot, located, len(sources) * size, stores=True):
            return
        pairs = [source(m) for source in sources]
        _write_memory(m, ctx, located, [intops.truncate(m.full(v), 8 * size) for v, _ in pairs],
                      [m.full(b) for _, b in pairs], size)
    return run


#: Address taints that make ptxas treat an address as possibly different between lanes.
VARYING = taint.THREAD | taint.LOADED | taint.UNMODELLED | taint.BRANCH
SPIN_REASON = ("ptxas implements a 64-bit shared atom.{op} as an LDS.64 + ATOMS.CAST.SPIN.64 retry loop, which "
               "the PTX does not contain: its passes follow the lanes' collisions and values; the SASS level "
               "(--level sass) runs the loop")


def hardware_atomic(row: dict, ctx: Context, keys: list[str], address_index: int) -> tuple[str, bool, bool]:
    """(operation as executed, warp-aggregated when the address is uniform, compiled to a CAS spin loop).

    What ptxas makes of a shared atomic on sm_90 (atomics2.cu, docs/hardware.md): ``atom.add`` of the
    constant 1 whose result nobody reads is ATOMS.POPC.INC; an add (any value) and an unused
    min/max/and/or at an address that is the same in every lane by construction is one ATOMS by one
    lane after a warp reduction (only when the whole warp is active); 64-bit add/min/max/and/or/xor/inc/dec
    have no ATOMS form."""
    op = atomic_op(row)
    size, _, is_float = _element(row)
    operands = row["operands"] or []
    value = operands[address_index + 1] if len(operands) > address_index + 1 else None
    read = getattr(ctx, "read_registers", None)
    unused = not keys or (read is not None and not any(key in read for key in keys))
    if op == "add" and not is_float and size == 4 and value is not None and value["kind"] == "imm" \
            and int(value["value"]) == 1 and unused:
        return "popc_inc", False, False
    spin = size == 8 and not is_float and op in ("add", "min", "max", "and", "or", "xor", "inc", "dec")
    aggregated = not is_float and (op == "add" or (op in ("min", "max", "and", "or") and unused))
    return op, aggregated and not spin, spin


def _leaders(m, lanes: np.ndarray, offsets: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """``lanes`` with each full warp whose address is uniform (by construction and in value) cut to its last
    lane: ptxas's warp-aggregated atomic (VOTE.ANY == all lanes, a reduction, one ATOMS by lane 31)."""
    width = m.warp_size
    warps = lanes.reshape(-1, width)
    same = (offsets.reshape(-1, width) == offsets.reshape(-1, width)[:, :1]).all(axis=1)
    uniform = warps.all(axis=1) & same & ((bits & VARYING) == 0).reshape(-1, width).all(axis=1)
    if not uniform.any():
        return lanes
    return lanes & ~(np.repeat(uniform, width) & (m.lane % 32 != 31))


def atomic_op(row: dict) -> str:
    """The operation of an atom/red (add, inc, cas, ...)."""
    return next((m for m in row["modifiers"] or [] if m in ATOMIC_OPS), "add")


def _atomic(slot, ctx, row, modifiers):
    space = space_of(row)
    address_index = address_operand(row)
    has_result = row["opcode"] == "atom"
    keys = [register_key(n, slot) for n in split_destinations(row["operands"][0]) if n and n != "_"] \
        if has_result else []
    if space not in ("shared", "generic", "global") or address_index is None:
        write = _loaded_destinations(row, slot) if has_result else None
        return (lambda m, mask: write(m, mask)) if write else (lambda m, mask: None)
    if space == "global" and ctx.memory is None:
        write = _loaded_destinations(row, slot) if has_result else (lambda m, mask: None)
        if ctx.relevant_registers is not None and not any(key in ctx.relevant_registers for key in keys):
            return write                 # its old value reaches no address, condition or modelled memory
        return global_without_data(address_reader(row["operands"][address_index], slot, ctx), ctx, write)
    op = atomic_op(row)
    size, is_signed, is_float = _element(row)
    operands = [reader(o, slot, ctx) for o in row["operands"][address_index + 1:]]
    locate = _locate(slot, ctx, address_index, space)
    hardware_op, aggregated, spin = hardware_atomic(row, ctx, keys, address_index)
    recorder = _recorder(slot, "atom", access_bytes(row), op=hardware_op) if space != "global" else None

    def run(m, mask):
        located = locate(m, mask)
        shared_lanes, offsets, global_lanes, address, bits = located
        if spin and shared_lanes is not None and shared_lanes.any():
            m.report_unresolved(slot, SPIN_REASON.format(op=op), shared_lanes.reshape(-1, m.warp_size).any(axis=1))
        elif recorder is not None and shared_lanes is not None:
            recorder(m, _leaders(m, shared_lanes, offsets, bits) if aggregated else shared_lanes, offsets, bits)
        (b, b_bits), (c, c_bits) = (operands + [lambda m: (U64(0), taint.ZERO)] * 2)[0](m), \
            (operands[1:] + [lambda m: (U64(0), taint.ZERO)])[0](m)
        b, b_bits, c, c_bits = m.full(b), m.full(b_bits), m.full(c), m.full(c_bits)
        old = np.zeros(m.size, dtype=np.uint64)
        old_bits = np.full(m.size, taint.LOADED, dtype=np.uint64)
        if shared_lanes is not None and ctx.shared_values and not _assumed_undone(m, ctx, slot, located, size, True):
            atomic_shared(m, shared_lanes, offsets, bits, op, size, is_signed, is_float, (b, b_bits, c, c_bits),
                          old, old_bits)
        if global_lanes is not None and ctx.memory is None and global_lanes.any():   # a generic address
            note_reads_without_data(m, ctx, address[global_lanes], bits[global_lanes])
        elif global_lanes is not None:
            atomic_global(ctx, global_lanes, address, bits, op, size, is_signed, is_float, (b, b_bits, c, c_bits),
                          old, old_bits)
        if is_signed:
            old = _sign_extend(old, size)
        for key in keys:
            m.write(key, old, old_bits, mask)
    return run


def atomic_shared(m, lanes: np.ndarray, offsets: np.ndarray, bits: np.ndarray, op: str, size: int, is_signed: bool,
                  is_float: bool, operands: tuple, old: np.ndarray, old_bits: np.ndarray) -> None:
    """Shared ``lanes`` apply one atomic each (thread order) to their CTA's shared memory; the old values and
    their taints go into ``old``/``old_bits`` (both levels run shared atomics here).  A lane at an unknown
    address may have changed any byte of its CTA."""
    if not lanes.any():
        return
    b, b_bits, c, c_bits = operands
    contents = m.shared_contents()
    known = (bits & taint.UNKNOWN) == 0
    inside = (offsets >= 0) & (offsets + size <= contents.bytes_per_cta)
    chosen = np.flatnonzero(lanes & known & inside)
    start = m.cta_index[chosen] * contents.bytes_per_cta + offsets[chosen]
    values, value_bits = atomic(contents.data, contents.taint, start, op, 8 * size, is_signed, is_float,
                                b[chosen], b_bits[chosen], c[chosen], c_bits[chosen])
    old[chosen] = values
    old_bits[chosen] = taint.read_back(value_bits | (bits[chosen] & taint.CTA_ANY)) | taint.THREAD
    if (lanes & ~known).any():
        contents.forget(m.cta_index[lanes & ~known])


def atomic_global(ctx, lanes: np.ndarray, address: np.ndarray, bits: np.ndarray, op: str, size: int,
                  is_signed: bool, is_float: bool, operands: tuple, old: np.ndarray, old_bits: np.ndarray) -> None:
    """Global ``lanes`` apply one atomic each (thread order) to the --data buffers their addresses lie in; old
    values as :func:`atomic_shared` (both levels).  Another CTA may change the word: the old value depends on
    the CTA."""
    if ctx.memory is None or not lanes.any():
        return
    b, b_bits, c, c_bits = operands
    known = (bits & taint.UNKNOWN) == 0
    which, offset = ctx.memory.owner(address)
    for index, buffer in enumerate(ctx.memory.buffers):
        chosen = np.flatnonzero(lanes & known & (which == index) & (offset >= 0) & (offset + size <= len(buffer.data)))
        ctx.memory.note(index, offset[chosen], size, chosen, writes=True)
        values, value_bits = atomic(buffer.data, buffer.taint, offset[chosen], op, 8 * size, is_signed, is_float,
                                    b[chosen], b_bits[chosen], c[chosen], c_bits[chosen])
        old[chosen], old_bits[chosen] = values, taint.read_back(value_bits | taint.CTA) | taint.THREAD
    forget_if_wild(ctx, lanes, bits)


def _matrix(slot, ctx, row, modifiers):
    matrices = next((MATRIX_COUNTS[m] for m in modifiers if m in MATRIX_COUNTS), 1)
    space = space_of(row)
    address_index = address_operand(row)
    kind = SHARED_ACCESS_KINDS[row["opcode"]]
    record = _shared_access(slot, ctx, address_index, kind, 16, generic=space == "generic", matrices=matrices)
    if kind == "stmatrix":
        return record
    write = _loaded_destinations(row, slot)

    def run(m, mask):
        record(m, mask)
        write(m, mask)
    return run


def _wmma(slot, ctx, row, modifiers):
    """wmma.load.{a,b,c} / wmma.store.d: the accesses ptxas lowers the instruction to (:mod:`traceconf.ptx.wmma`),
    each lane at ``base + row * stride + byte``; wmma.mma moves no memory."""
    found = wmma_access(row["opcode"], modifiers)
    address_index = address_operand(row)
    if found is None or address_index is None:
        return None
    matrix, layout, shape, type_, space = found
    accesses = lowering(matrix, layout, shape, type_, space)
    is_load = matrix != "d"
    write = _loaded_destinations(row, slot) if is_load else (lambda m, mask: None)
    if accesses is None:
        return write
    note = f"PTX line {row['ptx_line']} ({row['text'].split()[0]}): {WMMA_NOTE}"
    if note not in ctx.notes:           # once per instruction, however often a call inlines it
        ctx.notes.append(note)
    operands = row["operands"]
    stride_index = 2
    stride = reader(operands[stride_index], slot, ctx) if len(operands) > stride_index else \
        (lambda m, value=U64(default_stride(matrix, layout, shape)): (value, taint.ZERO))
    bits_per_element = U64(WMMA_TYPE_BITS[type_])
    locate = _locate(slot, ctx, address_index, space)
    lowered = [(_recorder(slot, access["kind"], access["bytes"], access["matrices"]),
                np.asarray(access["row"], np.int64), np.asarray(access["byte"], np.int64)) for access in accesses]

    def run(m, mask):
        lanes, offsets, _, _, bits = locate(m, mask)
        step, step_bits = stride(m)
        row_bytes = ((m.full(step) & SHARED_OFFSET_MASK) * bits_per_element // U64(8)).view(np.int64)
        bits = bits | m.full(step_bits)
        lane = m.lane % 32
        for record, rows, offsets_in_row in lowered:
            lane_rows, lane_bytes = rows[lane], offsets_in_row[lane]
            record(m, lanes & (lane_rows >= 0), offsets + lane_rows * row_bytes + lane_bytes, bits)
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
    kind = SHARED_ACCESS_KINDS[row["opcode"]]
    if "cg" not in modifiers:        # .ca: a zero-fill does not change its counts (docs/hardware.md)
        return _shared_access(slot, ctx, 0, kind, size, generic=False)
    # cp.async.cg is LDGSTS.BYPASS; a src-size operand that may zero-fill makes it .ZFILL (an ignore-src predicate,
    # src-size 0 and a register only ever 0 or 16 keep BYPASS with an ignore-src predicate)
    extra = operands[3:len(operands) - any("cache_hint" in m for m in modifiers)]   # without a cache-policy
    operand = extra[0] if extra else None
    if operand is None or operand["kind"] == "imm":
        full = operand is None or int(operand["value"]) == size
        return _copy_with_sources(slot, ctx, kind, size, "bypass" if full or int(operand["value"]) == 0
                                  else "bypass_zfill", None if full else operand)
    # A register: an ignore-src predicate as declared (.pred), else a src-size, whose .ZFILL ptxas drops when every
    # write of it gives 0 or cp-size (``mov.u32 %r, 16``, Triton's ``selp.b32 %r, 16, 0, %p``): the program tells.
    name = operand["name"].lstrip("!")
    ignore_src = operand["kind"] == "pred_not" or operand["name"].startswith("!")
    chosen = []

    def run(m, mask):
        if not chosen:
            predicate = ignore_src or m.program.register_type(name, slot) == "pred"
            op = "bypass" if predicate else _src_size_copy_op(m.program, register_key(name, slot), size)
            chosen.append(_copy_with_sources(slot, ctx, kind, size, op, operand, predicate))
        chosen[0](m, mask)
    return run


def _src_size_copy_op(program, key: str, size: int) -> str:
    """``bypass`` if every instruction writing src-size register ``key`` gives 0 or ``size`` (a ``mov`` or
    ``selp`` of immediates: ptxas emits LDGSTS.BYPASS with an ignore-src predicate), else ``bypass_zfill``."""
    writes = _writers(program, key)
    sources = {"mov": slice(1, 2), "selp": slice(1, 3)}
    known = writes and all(row["opcode"] in sources and all(
        o["kind"] == "imm" and int(o["value"]) in (0, size) for o in row["operands"][sources[row["opcode"]]])
        for row in writes)
    return "bypass" if known else "bypass_zfill"


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


def _param_location(row: dict, slot: Slot, ctx: Context) -> tuple[str | None, int]:
    """(the parameter symbol of the address, its offset); None for a parameter reached through a register (its
    address was taken), whatever the register's spelling, or an absolute address: not modelled."""
    operand = row["operands"][address_operand(row)]
    name = operand.get("name")
    if name is None or register_key(name, slot) in ctx.registers:
        return None, 0
    return param_symbol(name, slot), int(operand.get("value") or 0)


def _load_param(slot, ctx, row):
    symbol, offset = _param_location(row, slot, ctx)
    keys = [register_key(n, slot) if n != "_" else None for n in split_destinations(row["operands"][0])]
    bits = TYPE_BITS.get(row.get("type") or "b32", 32)
    size = max(1, bits // 8)
    if symbol is None:
        return unknown_result(row, slot, ctx, taint.UNMODELLED)
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
    raw = ctx.param_values[name] if known else value_without_param(index, ctx.param_bytes.get(name) or 0)
    raw %= 1 << (8 * max(ctx.param_bytes.get(name) or 8, 8))
    taint_bits = taint.ZERO if known else taint.missing_param(index)
    values = [(key, U64((raw >> (8 * (offset + position * size))) & ((1 << bits) - 1)), taint_bits)
              for position, key in enumerate(keys)]

    def run(m, mask):
        for key, value, taint_bits in values:
            if key is not None:
                m.write(key, value, taint_bits, mask)
    return run


def _store_param(slot, ctx, row):
    symbol, offset = _param_location(row, slot, ctx)
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
    "ldmatrix": _matrix, "stmatrix": _matrix, "cp": _copy, "wmma": _wmma,
    "mbarrier": _mbarrier, "tex": _texture, "tld4": _texture, "suld": _texture, "sured": _texture,
}
