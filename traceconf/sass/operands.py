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

import re
from dataclasses import dataclass, field

import numpy as np

from traceconf.emulate import taint

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


@dataclass
class Operand:
    """One parsed SASS operand."""

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


def parse_operand(text: str) -> Operand:
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
