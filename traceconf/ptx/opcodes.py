"""What an opcode token means: base opcode, modifiers, state space, type, width.

The grammar reads an opcode with all its dotted modifiers as one token
(``ld.volatile.shared::cta.v4.b32``); :func:`opcode_info` splits it and derives
the INSTRUCTIONS columns that depend on the opcode alone.  It is memoised: a
PTX file uses a few hundred distinct opcode tokens at most.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from typing import NamedTuple

from traceconf.kinds import UNCOUNTED

#: Base opcodes of PTX ISA 1.0 - 9.x (chapter "Instruction Set").
KNOWN_OPCODES = frozenset("""
    abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind bmsk bra brev brkpt brx
    call clusterlaunchcontrol clz cnot copysign cos cp createpolicy cvt cvta discard div dp2a dp4a elect ex2
    exit fence fma fns getctarank griddepcontrol isspacep istypep ld ldmatrix ldu lg2 lop3 mad mad24 madc
    mapa match max mbarrier membar min mma mov movmatrix mul mul24 multimem nanosleep neg not or pmevent
    popc prefetch prefetchu prmt rcp red redux rem ret rsqrt sad selp set setmaxnreg setp shf shfl shl shr
    sin slct sqrt st stackrestore stacksave stmatrix sub subc suld suq sured sust szext tanh tcgen05
    tensormap testp tex tld4 trap txq vabsdiff vabsdiff2 vabsdiff4 vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax
    vmax2 vmax4 vmin vmin2 vmin4 vote vset vset2 vset4 vshl vshr vsub vsub2 vsub4 wgmma wmma xor
""".split())

#: Opcodes that can read or write memory through an address operand.
MEMORY_OPCODES = frozenset(
    "ld ldu st atom red ldmatrix stmatrix cp mbarrier prefetch prefetchu multimem discard applypriority wmma".split())

#: PTX opcode → the access kind it makes when it touches shared memory (the one PTX table; SASS opcodes
#: have theirs in :mod:`traceconf.sass.opcodes`).  ``cp`` counts only as ``cp.async``: a plain ``cp`` is no
#: memory access, and :func:`opcode_info` gives it no state space.
SHARED_ACCESS_KINDS = {"ld": "ld", "st": "st", "atom": "atom", "red": "atom", "ldmatrix": "ldmatrix",
                       "stmatrix": "stmatrix", "cp": "cp_async", "wmma": "ld"}

#: Memory opcodes that move memory contents into their destination registers (``atom``: the old value).
LOAD_OPCODES = frozenset("ld ldu atom ldmatrix tex tld4 suld".split())
#: Memory opcodes that store what their source operands give (``atom``/``red``: the operation's result).
STORE_OPCODES = frozenset("st atom red".split())
#: Every opcode that may change memory: the stores, and those that change it otherwise (a copy, a matrix, a
#: surface, a multimem reduction).
MEMORY_WRITE_OPCODES = STORE_OPCODES | frozenset("stmatrix cp sured sust multimem".split())

SPACES = frozenset("shared global local param const".split())

#: Bytes per element of every PTX type modifier.
TYPE_BYTES = {
    "b8": 1, "s8": 1, "u8": 1, "e4m3": 1, "e5m2": 1, "e2m1": 1, "e2m3": 1, "e3m2": 1, "ue8m0": 1,
    "b16": 2, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "e4m3x2": 2, "e5m2x2": 2, "e2m3x2": 2,
    "e3m2x2": 2, "ue8m0x2": 2,
    "b32": 4, "s32": 4, "u32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4, "tf32": 4, "s16x2": 4, "u16x2": 4,
    "b64": 8, "s64": 8, "u64": 8, "f64": 8, "f32x2": 8,
    "b128": 16,
    "pred": 1,
}

VECTOR_WIDTH = {"v2": 2, "v4": 4, "v8": 8}

#: ldmatrix / stmatrix move one 16-byte matrix row per lane.
MATRIX_ROW_BYTES = 16


class OpcodeInfo(NamedTuple):
    """Columns of INSTRUCTIONS that follow from the opcode token alone."""

    opcode: str
    modifiers: tuple[str, ...]
    memory: bool               # opcode can access memory (an address operand confirms it)
    state_space: str           # shared | global | local | param | const | generic
    spaces: tuple[str, ...]    # every space modifier, source order, with ::cta/::cluster kept
    type: str | None
    vector: int
    access_bytes: int          # per lane; cp.async takes it from its size operand instead
    size_operand: int          # index of the operand holding the byte count (cp.async), else -1


class UnknownOpcode(ValueError):
    """The base opcode is not a PTX instruction."""

    def __init__(self, opcode: str):
        close = difflib.get_close_matches(opcode, sorted(KNOWN_OPCODES), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        super().__init__(f"unknown instruction '{opcode}'{hint}")


@lru_cache(maxsize=None)
def opcode_info(token: str) -> OpcodeInfo:
    """Split ``ld.shared::cta.v4.b32`` and derive its columns; raises :class:`UnknownOpcode`."""
    opcode, *modifiers = token.split(".")
    if opcode not in KNOWN_OPCODES:
        raise UnknownOpcode(opcode)
    spaces = tuple(m for m in modifiers if m.split("::", 1)[0] in SPACES)
    types = [m for m in modifiers if m in TYPE_BYTES]
    type_ = types[-1] if types else None
    vector = next((VECTOR_WIDTH[m] for m in modifiers if m in VECTOR_WIDTH), 1)
    memory = opcode in MEMORY_OPCODES and not (opcode == "cp" and "async" not in modifiers)
    # A copy between two spaces (cp.async.ca.shared.global, cp.async.bulk.global.shared::cta)
    # counts as shared when either side is shared: shared memory is what traceconf analyses.
    bare = [s.split("::", 1)[0] for s in spaces]
    if not memory:
        state_space = None
    elif "shared" in bare:
        state_space = "shared"
    elif bare:
        state_space = bare[0]
    else:
        state_space = "generic"
    size_operand = -1
    if not memory:
        access_bytes = 0
    elif opcode in ("ldmatrix", "stmatrix"):
        access_bytes = MATRIX_ROW_BYTES
    elif opcode == "cp":
        # cp.async [dst], [src], cp-size{, src-size}; cp.async.bulk [dst], [src], size, ...
        access_bytes, size_operand = 0, 2
    elif opcode == "mbarrier":
        access_bytes = 8
    else:
        access_bytes = vector * TYPE_BYTES[type_] if type_ else 0
    return OpcodeInfo(opcode, tuple(modifiers), memory, state_space, spaces, type_, vector,
                      access_bytes, size_operand)


def shared_access_kind(opcode: str, state_space: str | None, modifiers=()) -> str | None:
    """Access kind of an instruction that names the shared state space (``ld.shared``, ``cp.async…shared``),
    else None (also for the shared-memory work :func:`uncounted_shared_op` names).  ``state_space`` is the
    INSTRUCTIONS column (see :func:`opcode_info`)."""
    if state_space != "shared" or uncounted_shared_op(opcode, modifiers):
        return None
    if opcode == "wmma" and modifiers is not None and "store" in modifiers:
        return "st"          # wmma.store.d (wmma.load.{a,b,c} are loads: their LDSM lowering says ldmatrix)
    return SHARED_ACCESS_KINDS.get(opcode)


def uncounted_shared_op(opcode: str, modifiers) -> tuple[str, str] | None:
    """(label, why) for shared-memory work that is no per-lane LSU access and so no wavefronts here
    (:data:`traceconf.kinds.UNCOUNTED`)."""
    modifiers = modifiers or ()
    if opcode == "cp" and "async" in modifiers and any(m.startswith(("bulk", "tensor")) for m in modifiers):
        return "tma", UNCOUNTED["tma"]
    if opcode == "wgmma" and "mma_async" in modifiers:
        return "wgmma", UNCOUNTED["wgmma"]
    return None


def may_access_shared(opcode: str, state_space: str | None) -> bool:
    """Whether the instruction can access shared memory: it names the shared space, or it addresses
    generically (whether a generic address lies in the shared window is the emulator's call)."""
    return opcode in SHARED_ACCESS_KINDS and state_space in ("shared", "generic")
