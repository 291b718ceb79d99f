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
        op = next((_ATOMIC_MODIFIERS[m] for m in modifiers if m in _ATOMIC_MODIFIERS), "add")
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
