"""SASS opcodes that can touch shared memory: access kind, bytes per lane, matrix count, operation.

Traces name instructions by their SASS mnemonic (``LDS.U.128``, ``STS``,
``LDSM.16.M88.4``, ``ATOMS.CAS.64``...).  The shared-memory space is decided by
the opcode: ``LDS``/``STS``/``ATOMS``/``LDSM``/``STSM`` always address the
shared window; ``LDGSTS`` (``cp.async``) writes shared memory on one side, and
the generic ``LD``/``ST``/``ATOM``/``RED`` do so only when their address falls
inside the shared window.  The width comes from the opcode, not from the
trace's ``mem_width`` column, which Accel-Sim fills with quirks (2 for
``LDSM.16.M88.4``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from traceconf.kinds import KIND_CODES, OP_CODES, UNCOUNTED

#: Where the address of an access must lie to count as shared.
ALWAYS = "always"        # the opcode addresses shared memory
IN_WINDOW = "in_window"  # only lanes whose address falls inside the shared window

_FAMILIES = {
    # family: (kind, default bytes, space)
    "LDS": ("ld", 4, ALWAYS),
    "STS": ("st", 4, ALWAYS),
    "ATOMS": ("atom", 4, ALWAYS),
    "LDSM": ("ldmatrix", 16, ALWAYS),
    "STSM": ("stmatrix", 16, ALWAYS),
    "LDGSTS": ("cp_async", 4, IN_WINDOW),
    "LD": ("ld", 4, IN_WINDOW),
    "ST": ("st", 4, IN_WINDOW),
    "ATOM": ("atom", 4, IN_WINDOW),
    "RED": ("atom", 4, IN_WINDOW),
}

#: Opcode families (text before the first ".") that can access shared memory.
FAMILIES = tuple(_FAMILIES)

_WIDTH = re.compile(r"[USBF]?(8|16|32|64|128)")
_MATRICES = re.compile(r"X?([124])")


@dataclass(frozen=True)
class SharedOp:
    """How one SASS opcode accesses shared memory."""

    opcode: str
    kind: str
    bytes: int
    matrices: int
    space: str  # ALWAYS or IN_WINDOW
    op: str = ""  # atomics: the operation; LDGSTS.BYPASS: bypass(_zfill) (kinds.OPS); "" otherwise

    @property
    def kind_code(self) -> int:
        return KIND_CODES[self.kind]

    @property
    def op_code(self) -> int:
        return OP_CODES[self.op]


#: Atomic modifiers -> operation; ATOMS.POPC.INC (atomicAdd of 1, result unused) and the CAS spin of
#: 64-bit emulated atomics (ATOMS.CAST.SPIN) are named by their first modifier.
_ATOMIC_MODIFIERS = {"POPC": "popc_inc", "CAS": "cas", "CAST": "cas", "ADD": "add", "INC": "inc", "DEC": "dec",
                     "EXCH": "exch", "MIN": "min", "MAX": "max", "AND": "and", "OR": "or", "XOR": "xor"}


def atomic_operation(modifiers: list[str]) -> str | None:
    """The operation an atomic's modifiers name (None: none, e.g. ``ATOMS.ARRIVE``)."""
    return next((_ATOMIC_MODIFIERS[m] for m in modifiers if m in _ATOMIC_MODIFIERS), None)


@lru_cache(maxsize=4096)
def shared_op(opcode: str) -> SharedOp | None:
    """The shared-memory access an opcode performs, or None if it never touches shared memory."""
    family, *modifiers = opcode.upper().split(".")
    if family not in _FAMILIES:
        return None
    kind, width, space = _FAMILIES[family]
    matrices = 0
    if kind in ("ldmatrix", "stmatrix"):
        # LDSM.16.M88.4 / LDSM.16.MT88.2 / STSM.16.M88 (x1): the count is the last modifier;
        # the "16" is the element size, each lane supplies one 16-byte row address.
        last = _MATRICES.fullmatch(modifiers[-1]) if len(modifiers) > 1 else None
        matrices = int(last.group(1)) if last else 1
    else:
        for modifier in modifiers:
            match = _WIDTH.fullmatch(modifier)
            if match:
                width = int(match.group(1)) // 8
    op = ""
    if kind == "atom":
        op = atomic_operation(modifiers) or "add"
    elif kind == "cp_async" and "BYPASS" in modifiers:
        # cp.async.cg; .ZFILL where the src-size may zero-fill part of the copy (on .ca forms it changes nothing)
        op = "bypass_zfill" if "ZFILL" in modifiers else "bypass"
    return SharedOp(opcode, kind, width, matrices, space, op)


#: SASS opcodes (before the first dot) of shared-memory work that is no per-lane LSU access:
#: the TMA unit's bulk and tensor copies, and the tensor cores' wgmma operand reads.
_UNCOUNTED = {"UBLKCP": "tma", "UBLKRED": "tma", "UBLKPF": "tma", "UTMALDG": "tma", "UTMASTG": "tma",
              "UTMAREDG": "tma", "UTMAPF": "tma", "HGMMA": "wgmma"}


def uncounted_op(opcode: str) -> tuple[str, str] | None:
    """(label, why) for a SASS opcode of shared-memory work that is not counted (:data:`traceconf.kinds.UNCOUNTED`)."""
    label = _UNCOUNTED.get(opcode.upper().split(".")[0])
    return (label, UNCOUNTED[label]) if label else None


#: Families that read or write global memory (generic ones: the lanes outside the shared window), with the kind
#: of access and whether a destination register receives what memory held.
_GLOBAL_FAMILIES = {"LDG": ("ld", True), "LD": ("ld", True), "STG": ("st", False), "ST": ("st", False),
                    "ATOMG": ("atom", True), "ATOM": ("atom", True), "REDG": ("atom", False), "RED": ("atom", False)}
_SIGNED = frozenset({"S8", "S16", "S32", "S64"})


@dataclass(frozen=True)
class GlobalOp:
    """How one SASS opcode accesses global memory (the lanes of a generic one outside the shared window)."""

    kind: str            # ld | st | atom
    bytes: int           # per lane
    signed: bool         # .S8/.S16 loads sign-extend; .S32 min/max compare signed
    is_float: bool       # .F32/.F16x2/.BF16...: a floating-point atomic
    op: str              # atomics: add, cas, exch, min, ...
    result: bool         # a destination register receives what memory held

    @property
    def type_name(self) -> str:
        """The PTX type name of the element read, as far as SASS tells: the width, and signedness below 32 bits."""
        bits = 8 * self.bytes
        return f"{'s' if self.signed else 'u'}{bits}" if self.bytes < 4 else f"b{bits}"


def element_of(modifiers: list[str], width: int = 4) -> tuple[int, bool, bool]:
    """(bytes, signed, float) of the element a memory opcode's modifiers name (``.U8``, ``.S16``, ``.64``,
    ``.S32``, ``.F32``...; ``width`` when none does)."""
    for modifier in modifiers:
        match = _WIDTH.fullmatch(modifier)
        if match:
            width = int(match.group(1)) // 8
    is_float = any(m.startswith(("F16", "F32", "F64", "BF16", "E4M3", "E5M2")) for m in modifiers)
    return width, bool(_SIGNED & set(modifiers)), is_float


@lru_cache(maxsize=4096)
def global_op(opcode: str) -> GlobalOp | None:
    """The global-memory access an opcode performs (LDG.E.U8, STG.E.128, ATOMG.E.CAS.STRONG.GPU, REDG.E.ADD...),
    or None if it never touches global memory through a lane address."""
    family, *modifiers = opcode.upper().split(".")
    if family not in _GLOBAL_FAMILIES:
        return None
    kind, result = _GLOBAL_FAMILIES[family]
    width, signed, is_float = element_of(modifiers)
    op = (atomic_operation(modifiers) or "add") if kind == "atom" else ""
    return GlobalOp(kind, width, signed, is_float, op, result)
