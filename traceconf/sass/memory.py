"""SASS memory instructions: shared accesses recorded per warp; global memory through the PTX level's model.

``LDS``/``STS``/``ATOMS``/``LDSM``/``STSM``/``LDGSTS`` always address the shared window; generic
``LD``/``ST``/``ATOM``/``RED`` do for the lanes whose address came from it (``SR_SWINHI``).  Width, kind
and matrix count come from :func:`traceconf.sass.opcodes.shared_op`.  ``LDG``/``STG``/``ATOMG``/``REDG``
(and the other lanes of the generic ones) read and write the ``--data`` buffers with the PTX level's
functions (:mod:`traceconf.emulate.memory`: one memory model for both levels); without ``--data`` what
they load is unknown.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from traceconf.emulate import intops, taint
from traceconf.emulate.contents import atomic
from traceconf.emulate.memory import (Reads, atomic_global, atomic_shared, copy_reads, global_without_data,
                                      located_by_cta, read_global, write_global)
from traceconf.emulate.speculation import check_nothing_stored
from traceconf.emulate.state import is_uniform, select
from traceconf.sass.opcodes import ALWAYS, atomic_operation, element_of, global_op, shared_op
from traceconf.sass.operands import M32, Operand, SassContext, pair_name, read_register, reader, write_register

U64 = np.uint64


def address_reader(op: Operand, ctx: SassContext, wide_base: bool):
    """Per-thread address of ``[R2+UR4+0x10]`` (register terms scaled by .X4 etc.)."""
    terms = [(reader(Operand("reg", name, name=name, wide=wide or wide_base), ctx), scale)
             for name, scale, wide in op.registers]
    offset = U64(op.value & 0xFFFF_FFFF_FFFF_FFFF)
    if len(terms) == 1 and terms[0][1] == 1 and not offset:
        return terms[0][0]                  # [R2]: the register itself (its reader gives uint64 values)

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
            names.extend(_registers(op, count))
        elif op.kind == "pred":
            names.append(op.name)

    def write(m, mask):
        for name in names:
            write_register(m, name, U64(0), taint.LOADED, mask)
    return write


def global_address_reader(op: Operand, ctx: SassContext, extended: bool):
    """Per-thread global address of ``[R2.64+0x10]``; with ``.E`` (64-bit addressing) a base register written
    without ``.64`` is the pair too (``ATOMG.E.CAS ... [R2]``, listings before sm_90)."""
    explicit = any(wide for *_, wide in op.registers)
    registers = [(name, scale, wide or (extended and not explicit and index == 0))
                 for index, (name, scale, wide) in enumerate(op.registers)]
    return address_reader(replace(op, registers=registers), ctx, wide_base=False)


def shared_memory(opcode: str, ops: list[Operand], mods: list[str], ctx: SassContext, slot, record: bool = True):
    """``run(m, mask)`` of a shared access: what it does to registers and shared memory, and its lanes recorded
    (``record``; an ``LDGSTS`` whose lanes Nsight counts otherwise records none: :func:`misread_guard`)."""
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
    contents = _contents_semantics(op, opcode, ops, address_index, ctx, write_loaded) if ctx.shared_values else None
    # the lanes of a generic access outside the shared window go to global memory (with --data)
    elsewhere = global_access(opcode, ops, address_index, ctx, slot) if generic and ctx.memory is not None else None
    copy_sources = _copy_sources(op, opcode, ops, address_index, ctx, slot)
    window = U64(ctx.window_high) << U64(32)
    base = U64(ctx.shared_base)
    plain = op.kind in ("ld", "st")

    def run(m, mask):
        value, bits = read(m)
        lanes = m.valid if mask is None else mask
        if row_lanes:
            lanes = lanes & (m.lane < row_lanes)
        bits = m.spread(bits)
        value = m.full(value)
        outside = None
        if generic:
            inside = (bits & taint.SHARED_WINDOW) != 0
            # a pointer parameter without a value is the host's pointer: global, like the PTX level takes it
            _space_unknown(m, slot, lanes & ~inside & ((bits & taint.WILD) != 0), bits)
            outside = lanes & ~inside
            lanes = lanes & inside
            value = value - window
        shared(m, mask, lanes, value, bits)
        if elsewhere is not None and outside.any():
            elsewhere(m, outside, value + window, bits)

    def shared(m, mask, lanes, value, bits):
        # (a guard's mask serves several accesses: whether it runs any thread is looked at once)
        if m.derived(lanes, "any", np.ndarray.any):
            selected = int(_selected_bits(m, lanes, bits))
            if not (m.address_unknown(slot, selected, "address") if record else selected & int(taint.UNKNOWN)):
                # an address register feeds a load and a store: its offsets are made once
                offsets = m.derived(value, ("shared offsets", int(base)), lambda v: shared_offsets(v, base))
                # it writes its destinations itself (the others' are loaded values), unless nothing needs them
                if contents and not _assumed_needless(m, slot, offsets, lanes, op.bytes):
                    lanes = contents(m, mask, lanes, offsets, _running_taint(m, bits, selected) if plain else bits)
                if record:
                    m.record_access(slot, kind_code, op.bytes, matrices, offsets, lanes, op_code,
                                    copy_sources and copy_sources(m, lanes))
                if contents:
                    return
            elif contents and op.kind != "ld":          # it may have written any byte of its CTA
                m.shared_contents().forget(m.cta_index[lanes])
        if write_loaded:
            write_loaded(m, mask)
    return run


def _assumed_needless(m, slot, offsets: np.ndarray, lanes: np.ndarray, size: int) -> bool:
    """Whether the launch's assumptions (:mod:`traceconf.emulate.speculation`) leave this access's contents work
    undone, after checking that its lanes stay where they assume."""
    assumed = m.contents_checked(slot, offsets, size, lambda: None if lanes is m.valid and m.all_valid else
                                 _threads(m, lanes))
    return assumed is not None and assumed.skip


def _selected_bits(m, lanes: np.ndarray, bits: np.ndarray):
    """The taints of ``bits`` over ``lanes``, OR-ed."""
    return np.asarray(bits).flat[0] if is_uniform(bits) else np.bitwise_or.reduce(bits) if lanes is m.valid else \
        np.bitwise_or.reduce(bits[_threads(m, lanes)])


def _running_taint(m, bits: np.ndarray, running: int) -> np.ndarray:
    """The address taint a load or store reads (``bits``, per thread): its CTA dependence in the running threads,
    whose taints OR to ``running``.  Where none of them depends on the CTA, one taint for every thread says the
    same (the others' are never read), and what is loaded keeps one taint too."""
    return bits if is_uniform(bits) or running & int(taint.CTA_ANY) else m.spread(U64(running))


def shared_offsets(value: np.ndarray, base) -> np.ndarray:
    """Per thread, the byte offset in the CTA's shared memory of the shared-window address ``value``."""
    offsets = (value & U64(0xFFFF_FFFF)).view(np.int64)
    # the reserved window start maps to byte 0 (in place: a new array above); an address inside the reserved
    # part stays as is
    if base:
        np.subtract(offsets, int(base), out=offsets)
        if int(offsets.min()) < 0:                  # (arithmetic: the lanes not running hold any address,
            offsets += int(base) * (offsets < 0)    # an irregular mask np.where branches on)
    return offsets


#: The predicate register Nsight Compute reads as false in an ``LDGSTS`` (as its guard or its ignore-src
#: operand), whatever the program set it to: ``@P0 LDGSTS`` counts no lane, ``LDGSTS ..., P0`` counts as no lane
#: reading, ``..., !P0`` as every lane reading (the ignore-src probes, docs/hardware.md).
NSIGHT_FALSE_PREDICATE = "P0"


def _copy_sources(op, opcode: str, ops: list[Operand], address_index: int, ctx: SassContext, slot):
    """``sources(m, lanes)`` of an ``LDGSTS``: (ACCESSES ``source``, ``src_size``) per thread.  The source is
    each lane's global source address (its second address operand, :meth:`Machine.copy_sources`) where the lane
    reads it and it is known, -1 elsewhere; the size, the bytes it copies: with an ignore-src predicate operand
    (``LDGSTS ..., P1``: the lane reads where it is true, Nsight taking :data:`NSIGHT_FALSE_PREDICATE` as false)
    the copy's or 0, and with ``.ZFILL`` the copy's less the zero-filled bytes the low bits of the source address
    hold (ptxas adds ``cp-size - src-size`` to the address), -1 where unknown; None without either operand (the
    lane copies all).  None for other accesses."""
    if op.kind != "cp_async":
        return None
    source = next((o for o in ops[address_index + 1:] if o.kind == "address"), None)
    if source is None:
        return None
    modifiers = opcode.split(".")[1:]
    read = global_address_reader(source, ctx, "E" in modifiers)
    ignore_src = next((o for o in ops[address_index + 1:] if o.kind == "pred"), None)
    zfill = "ZFILL" in modifiers
    reading = _lanes_reading(ignore_src, ctx, zfill)

    def sources(m, lanes):
        value, bits = read(m)
        address, size = copy_reads(m, slot, lanes, value, bits, *reading(m), op.bytes)
        if zfill:           # ptxas added the zero-filled bytes (cp-size - src-size) to the source address
            filled = np.where(address >= 0, address % op.bytes, 0)
            size = np.where(size > 0, np.where(address >= 0, size - filled, -1), size)
            address = np.where(address >= 0, address - filled, -1)
        return address, size if zfill or ignore_src is not None else None
    return sources


def misread_guard(row: dict, opcode: str) -> bool | None:
    """Whether Nsight counts every lane that reaches this ``LDGSTS`` (``@!P0``: True) or none (``@P0``: False),
    whatever its guard holds (it reads :data:`NSIGHT_FALSE_PREDICATE` as false there; the copy itself runs where
    the guard holds).  None for other instructions and guards: the lanes the guard keeps are counted."""
    op = shared_op(opcode)
    if op is None or op.kind != "cp_async" or row.get("guard") != NSIGHT_FALSE_PREDICATE:
        return None
    return bool(row.get("guard_negated"))


def copy_counted_by_nsight(opcode: str, ops: list[Operand], ctx: SassContext, slot, guard):
    """``count(m, mask)`` of ``@!P0 LDGSTS`` (:func:`misread_guard`): the lanes Nsight counts, every one that reached
    it (``mask``, before the guard ``guard``), recorded with the addresses their registers hold.  Where a lane the
    guard turns off has a shared destination or global source (the sources rule reads it) that is unknown, as where
    the kernel computes them under the guard and so never writes them there, the warp's execution is unresolved:
    Nsight counts whatever those registers hold (docs/hardware.md, "LDGSTS.BYPASS probes", "LDGSTS guard probes")."""
    op = shared_op(opcode)
    address_index = next(i for i, o in enumerate(ops) if o.kind == "address")
    read = address_reader(ops[address_index], ctx, wide_base=False)
    source = next((o for o in ops[address_index + 1:] if o.kind == "address"), None)
    read_source = global_address_reader(source, ctx, "E" in opcode.split(".")[1:]) if source is not None else None
    copy_sources = _copy_sources(op, opcode, ops, address_index, ctx, slot)
    base = U64(ctx.shared_base)

    def count(m, mask):
        lanes = m.valid if mask is None else mask
        value, bits = read(m)
        bits = m.spread(bits)
        m.check_known(slot, int(_selected_bits(m, lanes, bits)), "shared-memory address")
        holds, guard_bits = guard(m)
        turned_off = lanes & ~holds & ((guard_bits & taint.UNKNOWN) == 0)
        unknown = bits & taint.UNKNOWN
        if read_source is not None:
            unknown = unknown | (m.spread(read_source(m)[1]) & taint.WILD)
        unknown_off = turned_off & (unknown != 0)
        if unknown_off.any():
            per_warp = unknown_off.reshape(-1, m.warp_size)
            warps = per_warp.any(axis=1)
            m.report_unresolved(slot, _turned_off_reason(m, per_warp.sum(axis=1)[warps],
                                                         int(np.bitwise_or.reduce(unknown[unknown_off]))), warps)
            lanes = lanes & ~np.repeat(warps, m.warp_size)
        lanes = m.known_lanes(slot, lanes, bits, "address") if lanes.any() else None
        if lanes is not None:
            m.record_access(slot, op.kind_code, op.bytes, op.matrices, shared_offsets(m.full(value), base), lanes,
                            op.op_code, copy_sources and copy_sources(m, lanes))
    return count


def _turned_off_reason(m, lanes_per_warp: np.ndarray, bits: int) -> str:
    """Why ``@!P0 LDGSTS`` is unresolved: the lanes its guard turns off (``lanes_per_warp`` of them in each warp left
    out), which Nsight counts, have address registers with taints ``bits``."""
    most = int(lanes_per_warp.max())
    lanes = f"the {most} lanes" if int(lanes_per_warp.min()) == most else f"up to {most} lanes"
    unknown = bits & int(taint.UNKNOWN)
    # a register never written in a lane reads as a value the emulator does not model, and nothing else is there
    state = "the kernel never wrote there: what the page counts is not a function of the program" \
        if unknown == int(taint.UNMODELLED) else \
        f"hold values that depend on {m.findings.why(unknown)}: what the page counts there is unknown"
    return (f"Nsight counts {lanes} the guard @!{NSIGHT_FALSE_PREDICATE} turns off (it reads "
            f"{NSIGHT_FALSE_PREDICATE} as false for LDGSTS), whose address registers {state}")


def _lanes_reading(ignore_src: Operand | None, ctx: SassContext, zfill: bool):
    """``reading(m)`` -> (reads, known) per thread: does the copy read its source as Nsight counts it (the
    operand true; :data:`NSIGHT_FALSE_PREDICATE` taken as false, but as true in the ``.ZFILL`` form: ldgsts.cu's
    src-size 0 pages count every lane reading where a false operand, the ignore-src probes' v5, counts none),
    and is that known?"""
    if ignore_src is None:
        return lambda m: (True, True)
    want = U64(0 if ignore_src.negate else 1)
    if ignore_src.name == NSIGHT_FALSE_PREDICATE:
        return lambda m: (bool(want == U64(zfill)), True)
    read = reader(Operand("pred", ignore_src.name, name=ignore_src.name), ctx)

    def reading(m):
        value, bits = read(m)
        return (m.spread(value) & U64(1)) == want, (m.spread(bits) & taint.UNKNOWN) == 0
    return reading


def _space_unknown(m, slot, lanes: np.ndarray, bits: np.ndarray) -> None:
    """Lanes of a generic access whose address is not known: shared or global, nobody can tell; never taken as
    global silently (a pointer into shared memory may have come back from memory)."""
    if lanes.any():
        m.report_unresolved(slot, f"generic address depends on {m.findings.why(int(np.bitwise_or.reduce(bits[lanes])))}"
                                  ": whether it is shared memory is unknown", lanes.reshape(-1, m.warp_size).any(axis=1))


def global_memory(opcode: str, ops: list[Operand], mods: list[str], ctx: SassContext, slot):
    """``LDG``/``STG``/``ATOMG``/``REDG``: the --data buffers (``ctx.memory``) read and written per lane; without
    --data, loads give unknown values (the pointer parameters read through are named in the reasons)."""
    op = global_op(opcode)
    address_index = next((i for i, o in enumerate(ops) if o.kind == "address"), None)
    if op is None or address_index is None:
        return None
    read = global_address_reader(ops[address_index], ctx, "E" in mods)
    if ctx.memory is None:
        if not op.result:
            return lambda m, mask: None
        return global_without_data(read, ctx, _loaded(ops[:address_index], max(1, op.bytes // 4)))
    access = global_access(opcode, ops, address_index, ctx, slot)

    def run(m, mask):
        value, bits = read(m)
        access(m, m.valid if mask is None else mask, m.full(value), m.full(bits))
    return run


def global_destinations(ops: list[Operand], address_index: int) -> list[Operand]:
    """The register an access writes what memory held into (``ATOMG.E.ADD PT, R4, [...]``: after the predicate)."""
    return [op for op in ops[:address_index] if op.kind == "reg"][:1]


def global_access(opcode: str, ops: list[Operand], address_index: int, ctx: SassContext, slot):
    """``access(m, lanes, addresses, address taints)`` of the global lanes of a load, store or atomic, through the
    PTX level's global memory (:mod:`traceconf.emulate.memory`)."""
    op = global_op(opcode)
    registers = max(1, op.bytes // 4)
    piece, pieces = min(op.bytes, 8), max(1, op.bytes // 8)          # values move in 64-bit pieces
    destination = global_destinations(ops, address_index)
    names = _registers(destination[0], registers) if destination and op.result else []
    sources = ops[address_index + 1:]
    size_mask = U64((1 << (8 * piece)) - 1)

    def load(m, lanes, address, bits):
        reads = Reads(m, pieces)
        # SASS says the width (and sign below 32 bits), not whether the bits are a float or an integer
        read_global(m, ctx, slot, reads, lanes, address, bits, piece, op.signed, op.type_name, exact_type=False)
        located_by_cta(m, reads, bits)
        for k in range(pieces):
            _write_piece(m, names, k, reads.values[k], reads.bits[k], lanes)

    def store(m, lanes, address, bits):
        assumed = m.contents_of(slot)
        if assumed is not None and assumed.skip:        # its value is needed nowhere, if it writes no --data byte
            check_nothing_stored(ctx.memory, lanes, address, bits, op.bytes)
            return
        source = sources[0] if sources and sources[0].kind == "reg" else None
        halves = _value_of(m, _registers(source, registers)) if source is not None else \
            [(m.full(U64(0)), m.full(taint.UNMODELLED))] * pieces
        write_global(ctx, lanes, address, bits, [value & size_mask for value, _ in halves],
                     [value_bits for _, value_bits in halves], piece)

    operands = _atomic_operands(sources, ctx, op.bytes == 8)

    def atom(m, lanes, address, bits):
        old = np.zeros(m.size, dtype=np.uint64)
        old_bits = np.full(m.size, taint.LOADED, dtype=np.uint64)
        if op.is_float or op.bytes > 8:
            # floating-point atomics (FTZ, the hardware's rounding) are not evaluated: the word becomes unknown
            write_global(ctx, lanes, address, bits, [U64(0)] * pieces, [taint.FLOAT] * pieces, piece)
            old_bits[:] = taint.FLOAT
        else:
            atomic_global(ctx, lanes, address, bits, op.op, op.bytes, op.signed, False, operands(m), old, old_bits)
        for k in range(pieces):
            _write_piece(m, names, k, old, old_bits, lanes)

    return {"ld": load, "st": store, "atom": atom}[op.kind]


def _atomic_operands(sources: list[Operand], ctx: SassContext, wide: bool, one_each: bool = False):
    """``m -> (b, b taint, c, c taint)`` per thread of an atomic's ``Rb[, Rc]`` (pairs when ``wide``; 0 where
    absent); ``one_each``: b is 1 (``ATOMS.POPC.INC``: an add of 1 per lane)."""
    readers = [lambda m: (U64(1), taint.ZERO)] if one_each else [reader(source, ctx, wide) for source in sources[:2]]
    readers += [lambda m: (U64(0), taint.ZERO)] * (2 - len(readers))

    def read(m):
        (b, b_bits), (c, c_bits) = (operand(m) for operand in readers)
        return m.full(b), m.full(b_bits), m.full(c), m.full(c_bits)
    return read


def _write_piece(m, names: list[str], k: int, value, bits, lanes) -> None:
    """The ``k``-th 64-bit piece of a value into its (up to) two 32-bit registers of ``names``."""
    for half, name in enumerate(names[2 * k:2 * k + 2]):
        write_register(m, name, (value >> U64(32 * half)) & M32, bits, lanes)


def _words(m, contents, offsets: np.ndarray, size: int, lanes: np.ndarray):
    """Per thread, the index of its access in the ``size``-byte word view of shared memory
    (:meth:`SharedContents.word_index`), when the access of every thread of ``lanes`` lies inside its CTA's shared
    memory, aligned; else None.  The threads not running may hold any address (a register a guard skipped): where
    one does not serve, each of them reads the first word of its CTA instead.  Made once per offsets array (and
    mask): a load and a store at one address register share it."""
    word = m.derived(offsets, ("shared words", size),
                     lambda at: contents.word_index(m.shared_base(), at, size, m.extent))
    if word is None and not (lanes is m.valid and m.all_valid):
        running = m.lane_ones(lanes).view(np.int64)          # -1 where running: at & running is at * lanes
        word = m.derived(offsets, ("running words", size),
                         lambda at: contents.word_index(m.shared_base(), at & running, size), lanes)
    return word


def _threads(m, lanes: np.ndarray) -> np.ndarray:
    """The threads of the mask ``lanes``, made once per mask (a guard covers several accesses)."""
    return m.derived(lanes, "threads", np.flatnonzero)


def _shared_load(m, contents, offsets: np.ndarray, size: int, lanes: np.ndarray):
    """Values and taint per thread of a load of ``size`` bytes at ``offsets`` (:meth:`SharedContents.load_lanes`:
    anything where not in ``lanes``)."""
    word = _words(m, contents, offsets, size, lanes)
    if word is None:
        return contents.load_lanes(m.shared_base(), offsets, size, lanes)
    # every thread's word read at once: no per-lane selection (the taint is that of the running threads)
    every = lanes is m.valid and m.all_valid
    return contents.load_words(word, size, None if every else lambda: _threads(m, lanes))


def _shared_store(m, contents, offsets: np.ndarray, size: int, values, bits, lanes: np.ndarray) -> None:
    """Store ``values`` (per thread or one for all; the low ``size`` bytes are stored) with taints ``bits`` at
    ``offsets`` in ``lanes``."""
    word = _words(m, contents, offsets, size, lanes)
    if word is None:
        contents.store(m.cta_index, offsets, size, values, bits, lanes)
    elif lanes is m.valid and m.all_valid:
        contents.store_words(word, size, values, bits)
    else:
        chosen = _threads(m, lanes)
        contents.store_words(word[chosen], size, values, bits, chosen)


def _read_back(content_bits, address_bits):
    """Taint of a value read from shared memory, as the PTX level's loads have it: ``taint.read_back`` of
    what was stored, and opaque in the CTA where the address depends on it (whether a known value is there
    at all may change with the CTA)."""
    if not np.ndim(content_bits) and not np.ndim(address_bits):
        return U64(_read_back_one(int(content_bits), int(address_bits)))
    return _read_back_lanes(content_bits, address_bits)


def _read_back_lanes(content_bits, address_bits):
    bits = taint.read_back(content_bits) | taint.THREAD
    by_cta = (address_bits & taint.CTA_ANY) != 0
    return select(by_cta, bits | taint.CTA | taint.CTA_OPAQUE, bits) if by_cta.any() else bits


@functools.lru_cache(maxsize=1024)
def _read_back_one(content_bits: int, address_bits: int) -> int:
    """:func:`_read_back` of one taint each (every load whose words agree, the common case)."""
    return int(_read_back_lanes(U64(content_bits), U64(address_bits)))


def _collapsed(bits: np.ndarray):
    """``bits`` as one scalar where it is one spread to every thread (``ThreadState.spread``), else itself: work on
    it then costs nothing per lane."""
    return bits[0] if bits.strides == (0,) else bits


def _registers(first: Operand, count: int) -> list[str]:
    """``count`` consecutive registers from ``first`` (a pair, a quad)."""
    names = [first.name]
    for _ in range(count - 1):
        names.append(pair_name(names[-1]))
    return names


def _value_of(m, names: list[str]) -> list[tuple]:
    """(value, taint) of each 8-byte half of the registers ``names`` (two 32-bit registers per half)."""
    halves = []
    for low in range(0, len(names), 2):
        value, bits = read_register(m, names[low])
        value = m.full(value) & M32
        bits = m.full(bits)
        if low + 1 < len(names):
            high, high_bits = read_register(m, names[low + 1])
            value = value | ((m.full(high) & M32) << U64(32))
            bits = bits | m.full(high_bits)
        halves.append((value, bits))
    return halves


def _contents_semantics(op, opcode: str, ops: list[Operand], address_index: int, ctx: SassContext, write_loaded):
    """``apply(m, mask, lanes, offsets, address_bits) -> lanes to record``: what the access does to shared
    memory's contents and to its destinations (``lanes`` from the contents, the rest of ``mask`` loaded values:
    ``write_loaded``), when the kernel keeps them (``ctx.shared_values``)."""
    size, registers = op.bytes, max(1, op.bytes // 4)
    sources = ops[address_index + 1:]
    signed = next((int(m[1:]) for m in opcode.split(".")[1:] if m in ("S8", "S16")), 0)
    first_destination = next((o for o in ops[:address_index] if o.kind == "reg"), None)     # ATOM PT, Rd, [a]...

    def words(offsets):
        """(offsets, bytes) of each register's part of each lane's access: one taint per register, so a word
        nothing wrote (the 4th of an LDS.128 over 3 warps' totals, CUB's block scan) leaves the others known."""
        return [(offsets + 4 * k if k else offsets, min(size, 4)) for k in range(registers)]

    def load(m, mask, lanes, offsets, bits):
        # every lane the instruction runs in reads the contents: nothing is left a loaded value
        if write_loaded and lanes is not (m.valid if mask is None else mask):
            write_loaded(m, mask)
        if first_destination is None:
            return lanes
        names = _registers(first_destination, registers)
        contents = m.shared_contents()
        # every thread loads: a plain write (no select over an all-true mask, the taint kept one scalar)
        written = None if lanes is m.valid and m.all_valid else lanes
        for name, (at, width) in zip(names, words(offsets)):
            # at most 4 bytes: the value read fits the register
            value, content_bits = _shared_load(m, contents, at, width, lanes)
            if signed:             # LDS.S8 / LDS.S16: the register holds the sign-extended 32-bit value
                value = intops.bits_of(intops.signed(value, signed)) & M32
            write_register(m, name, value, _read_back(content_bits, _collapsed(bits)), written)
        return lanes

    def store(m, mask, lanes, offsets, bits):
        contents = m.shared_contents()
        from_registers = sources and sources[0].kind == "reg"
        names = _registers(sources[0], registers) if from_registers else [None] * registers
        for name, (at, width) in zip(names, words(offsets)):
            value, value_bits = read_register(m, name) if name is not None else (U64(0), taint.LOADED)
            value_bits = value_bits | (_collapsed(bits) & taint.CTA_ANY)     # (at most 4 bytes of value stored)
            _shared_store(m, contents, at, width, value, value_bits, lanes)
        return lanes

    def clobber(m, mask, lanes, offsets, bits):
        """What the access writes is not modelled (other atomics, STSM, the async LDGSTS): unknown from now."""
        if write_loaded:
            write_loaded(m, mask)
        for at, width in words(offsets):
            m.shared_contents().store(m.cta_index, at, width, U64(0), taint.LOADED, lanes)
        return lanes

    if op.kind == "ld":
        return load
    if op.kind == "st":
        return store
    if op.kind == "atom" and "SPIN" in opcode.split("."):
        return _spin(size, first_destination, sources, write_loaded)
    if op.kind == "atom":
        return _atomic(opcode, first_destination, sources, ctx, write_loaded) or clobber
    return None if op.kind == "ldmatrix" else clobber


def _atomic(opcode: str, destination: Operand | None, sources: list[Operand], ctx: SassContext, write_loaded):
    """ATOMS.ADD/INC/DEC/CAS/EXCH/MIN/MAX/AND/OR/XOR Rd, [a], Rb[, Rc] and ATOMS.POPC.INC (each lane adds 1):
    the PTX level's shared atomics (lanes in thread order, :func:`traceconf.emulate.memory.atomic_shared`), the
    old value into Rd.  None where the result is not evaluated (floating point, an operation without one)."""
    modifiers = opcode.split(".")[1:]
    operation = atomic_operation(modifiers)
    size, signed, is_float = element_of(modifiers)
    if operation is None or is_float or size not in (4, 8):
        return None
    names = _registers(destination, size // 4) if destination is not None else []
    operands = _atomic_operands(sources, ctx, size == 8, one_each=operation == "popc_inc")
    operation = "add" if operation == "popc_inc" else operation    # atomicAdd(p, 1), the result unused

    def apply(m, mask, lanes, offsets, bits):
        if write_loaded:
            write_loaded(m, mask)
        old = np.zeros(m.size, dtype=np.uint64)
        old_bits = np.full(m.size, taint.LOADED, dtype=np.uint64)
        atomic_shared(m, lanes, offsets, bits, operation, size, signed, False, operands(m), old, old_bits)
        _write_piece(m, names, 0, old, old_bits, lanes)
        return lanes
    return apply


def _spin(size: int, destination: Operand | None, sources: list[Operand], write_loaded):
    """ATOMS.CAST.SPIN(.64) Rd, [a], Rcompare, Rnew, the compare-and-store of ptxas's retry loop for the
    atomics shared memory lacks (64-bit add/min/max/and/or).  In one pass per 128-byte lane group (16 lanes
    of 8 bytes), the lowest active lane of each bank serves; the others fail and the loop retries them.
    Served lanes compare and store in lane order; Rd is 1 where the stored word was the expected one.  This
    reproduces every atomics2.cu Source page (executions, wavefronts and ideal, docs/hardware.md).  Every
    lane that executes it is recorded (op ``cas_spin``): the rule set serves each active lane group in one pass
    (the served lanes never conflict), and Nsight's ideal counts the bytes of all of them."""
    words = max(size, 4)
    group_lanes = 128 // words
    registers = max(1, size // 4)

    def apply(m, mask, lanes, offsets, bits):
        contents = m.shared_contents()
        threads = np.flatnonzero(lanes)
        unit = (offsets[threads] // words) % group_lanes                     # the bank(s) of the word
        _, first = np.unique(threads // group_lanes * group_lanes + unit, return_index=True)
        served = np.zeros(m.size, dtype=bool)
        served[threads[first]] = True
        (compare, compare_bits), = _value_of(m, _registers(sources[0], registers))
        (new, new_bits), = _value_of(m, _registers(sources[1], registers))
        success = np.zeros(m.size, dtype=np.uint64)
        success_bits = np.where(lanes & ~served, taint.ZERO, taint.LOADED).astype(np.uint64)   # unserved: fail
        chosen, start = contents.place(m.cta_index, offsets, size, served)
        if len(chosen):
            old, old_bits = atomic(contents.data, contents.taint, start, "cas", 8 * size, False, False,
                                   compare[chosen], compare_bits[chosen], new[chosen], new_bits[chosen])
            success[chosen] = old == (compare[chosen] & U64((1 << 8 * size) - 1))
            success_bits[chosen] = _read_back(old_bits | compare_bits[chosen], bits[chosen])
        if write_loaded:                    # the sources are read: the destinations may be written now
            write_loaded(m, mask)
        if destination is not None:
            names = _registers(destination, registers)
            write_register(m, names[0], success, success_bits, lanes)
            for name in names[1:]:
                write_register(m, name, U64(0), success_bits, lanes)
        return lanes
    return apply


def other_memory(ops, mods, loads: bool):
    if not loads:
        return lambda m, mask: None
    address_index = next((i for i, o in enumerate(ops) if o.kind == "address"), len(ops))
    widths = [int(x) for x in mods if x in ("64", "128")]
    count = max(1, (widths[0] // 32) if widths else 1)
    write = _loaded(ops[:max(1, address_index)] if address_index else ops[:1], count)
    return write
