"""SASS operands → readers and writers over the emulator's thread state.

Registers live in the same per-thread register file as PTX registers
(:class:`traceconf.emulate.state.ThreadState`), keyed by their SASS names:
``R5``, ``UR4``, ``P0``, ``UP1``.  Uniform registers are stored per thread
too (every thread of a warp holds the same value), so one numpy operation
serves both datapaths.  ``RZ``/``URZ`` read 0 and ``PT``/``UPT`` read true;
writes to them are dropped.  A 64-bit operand (``R2.64``) is the pair
``R2`` (low word), ``R3`` (high word).  Values are uint64 bit patterns of
32-bit registers; predicates hold 0 or 1.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import numpy as np

from traceconf.emulate import taint
from traceconf.emulate.allocation import value_without_param
from traceconf.sass.listing import STACK_TOP, stack_pointer_offset

U64 = np.uint64
M32 = U64(0xFFFF_FFFF)
ZERO_REGS = frozenset({"RZ", "URZ", "SRZ"})
TRUE_PREDICATES = frozenset({"PT", "UPT"})

_REGISTER = re.compile(r"(?P<neg>[-~!]?)(?P<abs>\|?)(?P<name>U?R(?:Z|\d+)|U?P(?:T|\d))(?P<suffix>(?:\.[A-Za-z0-9_]+)*)\|?$")
_INT = re.compile(r"-?(?:0x[0-9a-fA-F]+|\d+)$")
_FLOAT = re.compile(r"[-+]?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|INF|NAN|QNAN)$")
_CONSTANT = re.compile(r"(?P<neg>[-~]?)\|?c\[(?P<bank>0x[0-9a-fA-F]+|\d+)\]\[(?P<terms>[^\]]+)\](?P<suffix>(?:\.[A-Za-z0-9_]+)*)\|?$")
_ADDRESS = re.compile(r"(?:desc\[(?P<desc>[^\]]+)\])?\[(?P<terms>[^\]]*)\]$")
_TERM = re.compile(r"\s*([+-]?)\s*([^+\-\s]+)")


@dataclass(frozen=True)
class Operand:
    """One parsed SASS operand (shared by every reader of the same text: :func:`parse_operand` keeps them)."""

    kind: str                       # reg | pred | imm | float | const | address | special | label | other
    text: str
    name: str | None = None         # register / predicate / special register name
    value: int = 0                  # immediate, constant offset, or address offset
    negate: bool = False            # -R3 (integer negation) or !P0 (predicate negation)
    invert: bool = False            # ~R3
    wide: bool = False              # .64 pair
    scale: int = 1                  # .X4 / .X8 / .X16 scaling in an address
    registers: list = field(default_factory=list)   # address / constant terms: (name, scale, wide)
    bank: int = 0


@functools.lru_cache(maxsize=1 << 14)
def parse_operand(text: str) -> Operand:
    """The operand ``text`` names; a kernel's set-up parses each of its operands several times (semantics,
    dataflow, class checks), and a listing repeats a few thousand texts: they are parsed once."""
    text = text.strip()
    match = _REGISTER.match(text)
    if match:
        name = match.group("name")
        suffixes = [s for s in match.group("suffix").split(".") if s]
        neg = match.group("neg")
        kind = "pred" if "P" in name and not name.endswith("Z") and name.lstrip("U").startswith("P") else "reg"
        return Operand(kind, text, name=name, negate=neg in "-!" and bool(neg), invert=neg == "~",
                       wide="64" in suffixes)
    if _INT.match(text):
        return Operand("imm", text, value=int(text, 0))
    if _FLOAT.match(text):
        return Operand("float", text)
    match = _CONSTANT.match(text)
    if match:
        registers, offset = _terms(match.group("terms"))
        return Operand("const", text, value=offset, registers=registers, bank=int(match.group("bank"), 0),
                       negate=match.group("neg") == "-", invert=match.group("neg") == "~",
                       wide="64" in match.group("suffix").split("."))
    match = _ADDRESS.match(text)
    if match:
        registers, offset = _terms(match.group("terms"))
        return Operand("address", text, value=offset, registers=registers, name=match.group("desc"))
    if text.startswith("SR_") or text == "SRZ":
        return Operand("special", text, name=text)
    if text.startswith("`(") or text.startswith("(") or text.startswith(".L"):
        return Operand("label", text, name=text.strip("`()"))
    return Operand("other", text)


def _terms(text: str) -> tuple[list, int]:
    registers, offset = [], 0
    for sign, term in _TERM.findall(text):
        if _INT.match(term):
            offset += -int(term, 0) if sign == "-" else int(term, 0)
            continue
        name, *suffixes = term.split(".")
        scale = next((int(s[1:]) for s in suffixes if re.fullmatch(r"X\d+", s)), 1)
        registers.append((name, scale, "64" in suffixes or "U64" in suffixes))
    return registers, offset


def pair_name(name: str) -> str:
    """The high register of a pair: R2 -> R3, UR4 -> UR5 (RZ stays RZ)."""
    if name in ZERO_REGS:
        return name
    prefix = "UR" if name.startswith("UR") else "R"
    return f"{prefix}{int(name[len(prefix):]) + 1}"


def read_register(m, name: str):
    if name in ZERO_REGS:
        return U64(0), taint.ZERO
    if name in TRUE_PREDICATES:
        return U64(1), taint.ZERO
    return m.read(name)


def write_register(m, name: str, value, bits, mask) -> None:
    if name in ZERO_REGS or name in TRUE_PREDICATES:
        return
    m.write(name, value, bits, mask)


def record_field(m, name: str, field: int, bits, mask) -> None:
    """After a write of register ``name``: its bits ``field`` carry taint ``bits`` (where ``mask``), whatever the
    rest of it carries.  ptxas packs predicates into bits of a register whose other bits were never written
    (``P2R R2, PR, R2, 0x4``); a later read of those bits alone (``R2P``, ``LOP3.LUT P0, RZ, R2, 0x4, RZ, 0xc0``)
    is as known as the predicates were.  The record holds while the register keeps the array written."""
    if name in ZERO_REGS or name not in m.regs:
        return
    old = m.bit_fields.get(name)
    outside = old[2] if old is not None and old[0] is m.regs[name] else m.taints[name]
    bits = np.broadcast_to(np.asarray(bits, dtype=np.uint64) | m.guard_taint, (m.size,))
    m.bit_fields[name] = (m.regs[name], field, bits if mask is None else np.where(mask, bits, outside))


def field_taint(m, name: str, field: int):
    """The taint of bits ``field`` of register ``name`` read alone: the recorded field's (:func:`record_field`)
    where it covers them and the register is unchanged since, else None (the register's own taint applies)."""
    entry = m.bit_fields.get(name)
    if entry is None or entry[0] is not m.regs.get(name) or field & ~entry[1]:
        return None
    return entry[2]


# --------------------------------------------------------------------------- readers and writers


class SassContext:
    """What compiling needs: launch facts, parameter block, shared window, unknown-opcode notes."""

    def __init__(self, kernel: str, path: str | None, arch: str | None, param_base: int,
                 params: list[dict], param_values: dict[str, int], shared_base: int,
                 window_high: int, pc_index: dict[int, int]):
        self.kernel, self.path, self.arch = kernel, path, arch
        self.param_base, self.params, self.param_values = param_base, params, param_values
        self.shared_base = shared_base          # shared-window offset of byte 0 of the kernel's shared memory
        self.window_high = window_high          # SR_SWINHI: high word of generic shared addresses
        self.pc_index = pc_index                # SASS pc -> slot index
        self.unknown_opcodes: dict[str, int] = {}
        self.reconvergence: dict[int, int] = {}     # SYNC/BRK/CONT pc -> slot index (set by the driver)
        self.param_names = [p["name"] for p in params]
        # shared memory's contents are kept (STS stores, LDS and atomics read back) only where a shared read
        # can change a count (traceconf.sass.dataflow); set by the driver, with the shared bytes per CTA
        self.shared_values = False
        self.shared_bytes = 0
        self.memory = None                      # GlobalContents: the --data buffers (None: global memory unknown)
        self.globals: dict[str, int] = {}       # module global (__device__ variable) -> its address
        self.from_ptx = False                   # the input file is the PTX the SASS was assembled from
        self.constants: dict[int, bytes] = {}   # constant banks other than 0 (jump tables...), from the binary


# --------------------------------------------------------------------------- reading operands


def predicate_is(value, want: bool = True):
    """Where bit 0 of ``value`` (a predicate register's, uint64) is ``want``, as bools: the bit taken in one
    narrowing pass to bytes, viewed as bools (half the CPU of ``(value & 1) == want``)."""
    bit = np.bitwise_and(np.asarray(value, dtype=np.uint64), 1, dtype=np.uint8)
    if not want:
        bit ^= np.uint8(1)
    return bit.view(np.bool_)


def signed32(value):
    """The low 32 bits as a signed number (int64)."""
    value = np.asarray(value, dtype=np.uint64)
    if value.ndim:          # a truncating cast and a view: two passes instead of five
        return value.astype(np.uint32).view(np.int32).astype(np.int64)
    value = value & M32
    return value.astype(np.int64) - ((value >> U64(31)) & U64(1)).astype(np.int64) * (1 << 32)


def _constant_reader(op: Operand, ctx: SassContext):
    """c[0x0][offset]: launch dimensions, kernel parameters; c[0x2]... the bytes the binary holds; anything
    else is unmodelled."""
    if op.bank != 0:
        return _bank_reader(op, ctx.constants.get(op.bank))
    register_readers = [(name, scale) for name, scale, _ in op.registers]
    size = 8 if op.wide else 4

    def at(m, offset: int):
        words = []
        for start in range(offset, offset + size, 4):
            words.append(_constant_word(m, ctx, start))
        if len(words) == 1:
            return words[0]
        (lo, lo_bits), (hi, hi_bits) = words
        return (lo & M32) | (hi << U64(32)), lo_bits | hi_bits

    if not register_readers:
        return lambda m: at(m, op.value)

    def indexed(m):
        total, bits = U64(op.value), taint.ZERO
        for name, scale in register_readers:
            value, b = read_register(m, name)
            total = total + value * U64(scale)
            bits = bits | b
        values = np.broadcast_to(np.asarray(total, dtype=np.uint64), (m.size,))
        first = int(values[0]) if m.size else 0
        if np.any(np.asarray(bits) & taint.UNKNOWN) or not np.all(values == first):
            return U64(0), taint.UNMODELLED | bits
        value, b = at(m, first & 0xFFFF)
        return value, b | bits
    return indexed


def _bank_reader(op: Operand, data: bytes | None):
    """c[bank][R + offset] of a bank whose bytes the binary gave (jump tables in bank 2), per thread; a read
    past them (or of a bank not given) is unmodelled."""
    if not data:
        return lambda m: (U64(0), taint.UNMODELLED)
    words = np.frombuffer(data[:len(data) // 4 * 4], dtype="<u4").astype(np.uint64)
    count = 2 if op.wide else 1

    def read(m):
        total, bits = U64(op.value), taint.ZERO
        for name, scale, _ in op.registers:
            value, b = read_register(m, name)
            total = total + np.asarray(value, dtype=np.uint64) * U64(scale)
            bits = bits | b
        index = np.asarray(total, dtype=np.uint64) // U64(4)
        inside = (np.asarray(total, dtype=np.uint64) % U64(4) == 0) & (index + U64(count) <= U64(len(words)))
        index = np.where(inside, index, U64(0)).astype(np.intp)
        value = words[index]
        if count == 2:
            value = value | (words[np.minimum(index + 1, len(words) - 1)] << U64(32))
        return np.where(inside, value, U64(0)), bits | np.where(inside, taint.ZERO, taint.UNMODELLED)
    return read


def _constant_word(m, ctx: SassContext, offset: int):
    """One 32-bit word of constant bank 0."""
    if offset < 0x18:
        index = offset // 4
        dims = (m.block + m.grid)[index] if index < 6 else 0
        return U64(dims), taint.ZERO
    if offset == stack_pointer_offset(ctx.arch):
        return U64(STACK_TOP), taint.ZERO
    relative = offset - ctx.param_base
    if 0 <= relative < 0x1000 and ctx.params:
        for index, param in enumerate(ctx.params):
            start, size = int(param["offset"]), int(param["bytes"] or 4)
            if start <= relative < start + size:
                name = param["name"]
                known = name in ctx.param_values
                raw = int(ctx.param_values[name]) if known else value_without_param(index, size)
                raw %= 1 << (8 * max(size, 8))
                return U64((raw >> (8 * (relative - start))) & 0xFFFF_FFFF), \
                    taint.ZERO if known else taint.missing_param(index)
        return U64(0), taint.UNMODELLED
    return U64(0), taint.UNMODELLED


_SPECIAL = {"SR_TID.X": "%tid.x", "SR_TID.Y": "%tid.y", "SR_TID.Z": "%tid.z", "SR_CTAID.X": "%ctaid.x",
            "SR_CTAID.Y": "%ctaid.y", "SR_CTAID.Z": "%ctaid.z", "SR_LANEID": "%laneid", "SR_VIRTID": "%warpid",
            "SR_LTMASK": "%lanemask_lt", "SR_LEMASK": "%lanemask_le", "SR_GTMASK": "%lanemask_gt",
            "SR_GEMASK": "%lanemask_ge", "SR_EQMASK": "%lanemask_eq"}


def _special_reader(op: Operand, ctx: SassContext):
    name = op.name
    if name == "SRZ":
        return lambda m: (U64(0), taint.ZERO)
    if name in ("SR_CgaCtaId", "SR_CTARANK"):
        # one CTA per cluster: the CTA's rank in its cluster is 0 (the window's bits 24+ stay 0)
        return lambda m: (U64(0), taint.ZERO)
    if name == "SR_SWINHI":
        high = U64(ctx.window_high)
        return lambda m: (high, taint.SHARED_WINDOW)
    if name == "SR_VIRTID":
        return lambda m: (m.special["%warpid"][0] & U64(0xFF), taint.ZERO)
    if name in _SPECIAL:
        key = _SPECIAL[name]
        return lambda m: m.special[key]
    return lambda m: (U64(0), taint.UNMODELLED)


def reader(op: Operand | str, ctx: SassContext, wide: bool | None = None):
    """``(value, taint)`` of a source operand; ``wide`` reads a 64-bit pair (default: the operand's .64)."""
    if isinstance(op, str):
        op = parse_operand(op)
    wide = op.wide if wide is None else wide
    if op.kind == "imm":
        value = U64(op.value & (0xFFFF_FFFF_FFFF_FFFF if wide else 0xFFFF_FFFF))
        return lambda m: (value, taint.ZERO)
    if op.kind == "float":
        return lambda m: (U64(0), taint.FLOAT)
    if op.kind == "const":
        read = _constant_reader(op, ctx)
        return _modify(read, op, wide)
    if op.kind == "special":
        return _special_reader(op, ctx)
    if op.kind == "pred":
        name = op.name
        if op.negate:
            return lambda m: _not(read_register(m, name))
        return lambda m: read_register(m, name)
    if op.kind == "reg":
        name = op.name
        if wide:
            high = pair_name(name)

            def read_pair(m):
                lo, lo_bits = read_register(m, name)
                hi, hi_bits = read_register(m, high)
                return (lo & M32) | (hi << U64(32)), lo_bits | hi_bits
            return _modify(read_pair, op, True)
        return _modify(lambda m: read_register(m, name), op, False)
    return lambda m: (U64(0), taint.UNMODELLED)


def _not(pair):
    value, bits = pair
    return value ^ U64(1), bits


def _modify(read, op: Operand, wide: bool):
    mask = U64(0xFFFF_FFFF_FFFF_FFFF) if wide else M32
    if op.negate:
        return lambda m: _neg(read(m), mask)
    if op.invert:
        return lambda m: ((~np.asarray(read(m)[0], dtype=np.uint64)) & mask, read(m)[1])
    return read


def _neg(pair, mask):
    value, bits = pair
    return (U64(0) - np.asarray(value, dtype=np.uint64)) & mask, bits


def taint_of(*pairs):
    out = taint.ZERO
    for _, b in pairs:
        out = out | b
    return out


# --------------------------------------------------------------------------- writers


def writer(op: Operand | str, wide: bool = False):
    """Store a value into a register (``wide``: a 64-bit value into the pair) or predicate."""
    if isinstance(op, str):
        op = parse_operand(op)
    name = op.name
    if op.kind == "pred":
        return lambda m, value, bits, mask: write_register(m, name, np.asarray(value, dtype=np.uint64) & U64(1),
                                                          bits, mask)
    if op.kind != "reg":
        return lambda m, value, bits, mask: None
    if wide or op.wide:
        high = pair_name(name)

        def write_pair(m, value, bits, mask):
            value = np.asarray(value, dtype=np.uint64)
            write_register(m, name, value & M32, bits, mask)
            write_register(m, high, value >> U64(32), bits, mask)
        return write_pair
    return lambda m, value, bits, mask: write_register(m, name, np.asarray(value, dtype=np.uint64) & M32, bits, mask)
