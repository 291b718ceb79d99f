"""The SASS instruction set's facts, one table: what every mnemonic is, and the predicates derived from it.

Every SASS opcode fact of the package lives in :data:`TABLE` below, one line per mnemonic (``grep -w BRXU
traceconf/sass/opcodes.py`` shows all the package knows of it); the SASS emulator (:mod:`traceconf.sass`),
the trace readers (:mod:`traceconf.traces`) and ``compare-ncu`` (:mod:`traceconf.analyses.ncu`) read it
through the functions of this module.  A mnemonic that is not in the table is not modelled: its results are
unknown and it is named in the notes.

Columns: the mnemonic (the opcode text before the first "."), its role, one detail the role needs, flags.

==========  =========================================================================================  ========
role        what it is                                                                                 detail
==========  =========================================================================================  ========
shared      always addresses the shared window (``LDS``, ``STSM``...)                                   kind:bytes
window      shared for the lanes whose (generic) address lies in the shared window, else global          kind:bytes
global      reads or writes global memory through a lane address                                        kind
local       reads or writes the thread's local memory (spills, stack frames), kept per thread         kind:bytes
load        reads memory the emulator does not model (local, textures, surfaces): unknown results       ``-``
store       writes memory the emulator does not model                                                   ``-``
tensor      shared-memory work that is no per-lane LSU access (TMA, wgmma): not counted                 label
matrix      register-only tensor-core arithmetic (``HMMA``...): no address, four destination registers  ``-``
int         integer, logic, predicate, move arithmetic, evaluated exactly                              handler
float       floating-point arithmetic: results unknown (``FLOAT``) unless the handler evaluates them   handler
warp        warp collectives, evaluated over the lanes taking part                                      handler
control     a control transfer (or a mark of one the emulation needs not follow)                        transfer
nop         no effect on addresses, masks, control flow or register values the emulator uses            ``-``
==========  =========================================================================================  ========

Transfers: ``branch`` (to a label or pc operand), ``indirect`` (to a register: a jump table or a computed
address), ``call`` (a subroutine whose return address is left in a register; indirect when its operand is a
register), ``return``, ``exit``, ``barrier``, ``reconverge`` (sm_5x/6x ``SYNC``/``BRK``/``CONT``: jump to the
point the ``pushed_by`` opcode named), ``mark`` (``BSSY``, ``WARPSYNC``...: nothing to follow, but a decision
all CTAs of a class must share).  Flags: ``writes`` (may store to memory beyond what its role says),
``opaque`` (writes shared memory without lane addresses: what the CTA's shared memory holds becomes
unknown), ``noresult`` (an atomic without a destination register), ``pairs`` (its register operands are
64-bit register pairs: double precision; CS2R's destination), ``hi_pair`` (its ``.HI`` form adds a
register pair, ``{c+1:c}``, to the product's high word: ``IMAD.HI``), ``affine=RULE`` (how a CTA-index-affine
value passes through it, :mod:`traceconf.sass.classes`), ``pushed_by=OPCODE``.

The shared-memory space is decided by the opcode: ``LDS``/``STS``/``ATOMS``/``LDSM``/``STSM`` always address
the shared window; ``LDGSTS`` (``cp.async``) writes shared memory on one side, and the generic
``LD``/``ST``/``ATOM``/``RED`` do so only when their address falls inside the shared window.  The width comes
from the opcode's modifiers, not from a trace's ``mem_width`` column, which Accel-Sim fills with quirks (2
for ``LDSM.16.M88.4``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from traceconf.kinds import KIND_CODES, KINDS, OP_CODES, UNCOUNTED

TABLE = """
# mnemonic    role      detail          flags
LDS           shared    ld:4
STS           shared    st:4
ATOMS         shared    atom:4
LDSM          shared    ldmatrix:16
STSM          shared    stmatrix:16
LDGSTS        window    cp_async:4
LD            window    ld:4
ST            window    st:4
ATOM          window    atom:4
RED           window    atom:4          noresult
LDG           global    ld
STG           global    st
ATOMG         global    atom
REDG          global    atom            noresult
LDL           local     ld:4
STL           local     st:4
TLD           load      -
TLD4          load      -
TEX           load      -
TXQ           load      -
SULD          load      -
LDTRAM        load      -
SUATOM        load      -               writes
SUST          store     -               writes
SURED         store     -               writes
STAS          store     -               writes
UTMALDG       tensor    tma             writes opaque
UBLKCP        tensor    tma             writes opaque
UTMASTG       tensor    tma             writes
UTMAREDG      tensor    tma             writes
UBLKRED       tensor    tma             writes
HGMMA         tensor    wgmma
IGMMA         tensor    wgmma
QGMMA         tensor    wgmma
BGMMA         tensor    wgmma
HMMA          matrix    -
IMMA          matrix    -
DMMA          matrix    -
BMMA          matrix    -
MOV           int       mov             affine=copy
UMOV          int       mov             affine=copy
MOV32I        int       mov             affine=copy
R2UR          int       mov             affine=copy
S2R           int       s2r             affine=copy
CS2R          int       s2r             pairs affine=copy
S2UR          int       s2r             affine=copy
LDC           int       ldc
ULDC          int       ldc
IMAD          int       imad            hi_pair affine=product
UIMAD         int       imad            hi_pair affine=product
IMUL          int       imad            affine=product
XMAD          int       xmad
IADD3         int       iadd3           affine=sum
UIADD3        int       iadd3           affine=sum
IADD          int       iadd            affine=sum
IADD32I       int       iadd            affine=sum
VIADD         int       iadd            affine=sum
UIADD         int       iadd            affine=sum
LEA           int       lea             affine=shifted_sum
ULEA          int       lea             affine=shifted_sum
ISCADD        int       iscadd          affine=shifted_sum
SHF           int       shf             affine=funnel_shift
USHF          int       shf             affine=funnel_shift
SHL           int       shl             affine=shift
SHR           int       shr
LOP3          int       lop3            affine=mask
ULOP3         int       lop3            affine=mask
LOP           int       lop
LOP32I        int       lop
PLOP3         int       plop3
UPLOP3        int       plop3
PSETP         int       psetp
ISETP         int       isetp           affine=comparison
UISETP        int       isetp           affine=comparison
SEL           int       sel             affine=select
USEL          int       sel             affine=select
FSEL          int       sel
IMNMX         int       imnmx
VIMNMX        int       imnmx
VIADDMNMX     int       imnmx
UIMNMX        int       imnmx
FLO           int       flo
UFLO          int       flo
POPC          int       popc
UPOPC         int       popc
BREV          int       brev
UBREV         int       brev
IABS          int       iabs
PRMT          int       prmt
UPRMT         int       prmt
SGXT          int       sgxt
USGXT         int       sgxt
BMSK          int       bmsk
UBMSK         int       bmsk
P2R           int       p2r
UP2UR         int       p2r
R2P           int       r2p
I2F           int       i2f
F2I           int       f2i
HFMA2         float     hfma2
MUFU          float     mufu
FADD          float     add
FADD32I       float     add
FMUL          float     mul
FMUL32I       float     mul
FFMA          float     fma
FFMA32I       float     fma
FMNMX         float     min_max
FSETP         float     setp
FMNMX3        float     -
FSET          float     -
FCHK          float     -
FRND          float     -
FSWZADD       float     -
DADD          float     -               pairs
DMUL          float     -               pairs
DFMA          float     -               pairs
DMNMX         float     -               pairs
DSET          float     -               pairs
DSETP         float     -               pairs
HADD2         float     -
HMUL2         float     -
HMNMX2        float     -
HSET2         float     -
HSETP2        float     -
F2F           float     -
F2FP          float     -
I2FP          float     i2fp
F2IP          float     -
SHFL          warp      shfl
VOTE          warp      vote
VOTEU         warp      vote
MATCH         warp      match
REDUX         warp      redux
BRA           control   branch
JMP           control   branch
BRX           control   indirect
BRXU          control   indirect
JMX           control   indirect
JMXU          control   indirect
CALL          control   call
JCAL          control   call
RET           control   return
EXIT          control   exit
KILL          control   exit
BAR           control   barrier
SYNC          control   reconverge      pushed_by=SSY
BRK           control   reconverge      pushed_by=PBK
CONT          control   reconverge      pushed_by=PCNT
WARPSYNC      control   mark
BSSY          control   mark
BSYNC         control   mark
BREAK         control   mark
SSY           nop       -
PBK           nop       -
PCNT          nop       -
PRET          nop       -
PLONGJMP      nop       -
NOP           nop       -
DEPBAR        nop       -
LDGDEPBAR     nop       -
MEMBAR        nop       -
FENCE         nop       -
CCTL          nop       -
CCTLL         nop       -
CCTLT         nop       -
ERRBAR        nop       -
CGAERRBAR     nop       -
YIELD         nop       -
NANOSLEEP     nop       -
BMOV          nop       -
PMTRIG        nop       -
BPT           nop       -
SETCTAID      nop       -
USETMAXREG    nop       -
WARPGROUP     nop       -
ACQBULK       nop       -
UCGABAR_ARV   nop       -
UCGABAR_WAIT  nop       -
UTMAPF        nop       -
UBLKPF        nop       -
UTMACCTL      nop       -
UTMACMDFLUSH  nop       -
SYNCS         nop       -               opaque
ARRIVES       nop       -               opaque
"""

ROLES = ("shared", "window", "global", "local", "load", "store", "tensor", "matrix", "int", "float", "warp", "control", "nop")
TRANSFERS = ("branch", "indirect", "call", "return", "exit", "barrier", "reconverge", "mark")
FLAGS = ("writes", "opaque", "noresult", "pairs", "hi_pair")
AFFINE_RULES = ("copy", "sum", "product", "shifted_sum", "shift", "funnel_shift", "mask", "select", "comparison")


@dataclass(frozen=True)
class SassOpcode:
    """One line of :data:`TABLE`."""

    mnemonic: str
    role: str
    detail: str | None      # kind:bytes, uncounted label, handler or transfer (see the module docstring)
    flags: frozenset[str]
    affine: str | None = None
    pushed_by: str | None = None

    @property
    def access(self) -> tuple[str, int] | None:
        """(kind, default bytes per lane) of a memory role."""
        if self.role not in ("shared", "window", "global", "local"):
            return None
        kind, _, width = self.detail.partition(":")
        return kind, int(width or 4)


def _parse(table: str) -> dict[str, SassOpcode]:
    opcodes = {}
    for number, line in enumerate(table.splitlines(), 1):
        words = line.split("#")[0].split()
        if not words:
            continue
        mnemonic, role, detail, *flags = words
        named = dict(flag.partition("=")[::2] for flag in flags)
        plain = frozenset(flag for flag, value in named.items() if not value)
        entry = SassOpcode(mnemonic, role, None if detail == "-" else detail, plain, named.get("affine"),
                           named.get("pushed_by"))
        problems = [mnemonic in opcodes and "listed twice", role not in ROLES and f"role {role!r}",
                    not plain <= set(FLAGS) and f"flags {sorted(plain - set(FLAGS))}",
                    entry.affine is not None and entry.affine not in AFFINE_RULES and f"rule {entry.affine!r}",
                    role == "control" and detail not in TRANSFERS and f"transfer {detail!r}",
                    role == "tensor" and detail not in UNCOUNTED and f"label {detail!r}",
                    entry.access is not None and entry.access[0] not in KINDS and f"kind {detail!r}"]
        if any(problems):
            raise ValueError(f"traceconf/sass/opcodes.py TABLE line {number}: {mnemonic}: "
                             f"{', '.join(p for p in problems if p)}")
        opcodes[mnemonic] = entry
    return opcodes


#: Every SASS mnemonic the package knows, by name.
OPCODES: dict[str, SassOpcode] = _parse(TABLE)


def opcode_text(sass: str) -> str:
    """The opcode of an instruction as SASS text writes it, its guard left out (``@!P0 LDS.U.128 R4, [R2]`` ->
    ``LDS.U.128``); "" for text without one."""
    tokens = sass.split()
    if tokens and tokens[0].startswith("@"):
        tokens = tokens[1:]
    return tokens[0] if tokens else ""


def opcode_of(mnemonic: str) -> SassOpcode | None:
    """The table's line for a mnemonic (``LDS``; no modifiers), None when it is not modelled."""
    return OPCODES.get(mnemonic.upper())


def mnemonics(role: str, detail: str | None = None) -> tuple[str, ...]:
    """The mnemonics of one role (and detail: a transfer, handler, label), in table order."""
    return tuple(name for name, entry in OPCODES.items()
                 if entry.role == role and (detail is None or entry.detail == detail))


def transfer(mnemonic: str) -> str | None:
    """The control transfer a mnemonic makes (:data:`TRANSFERS`), None for other instructions."""
    entry = OPCODES.get(mnemonic)
    return entry.detail if entry is not None and entry.role == "control" else None


def has_no_effect(mnemonic: str) -> bool:
    """Whether emulating the instruction changes nothing the emulator tracks (register-only tensor-core work
    and descriptor-addressed shared work included: their destinations hold no addresses)."""
    entry = OPCODES.get(mnemonic)
    return entry is not None and (entry.role in ("nop", "matrix", "tensor") or entry.detail == "mark")


def writes_shared_opaquely(mnemonic: str) -> bool:
    """Whether the instruction writes shared memory without lane addresses (TMA copies into it, mbarriers)."""
    entry = OPCODES.get(mnemonic)
    return entry is not None and "opaque" in entry.flags


#: Reconverging jumps of sm_5x/6x (``SYNC``) and the opcode that pushed their target (``SSY``).
RECONVERGE_JUMPS = {name: entry.pushed_by for name, entry in OPCODES.items() if entry.pushed_by}

#: Where the address of an access must lie to count as shared.
ALWAYS = "always"        # the opcode addresses shared memory
IN_WINDOW = "in_window"  # only lanes whose address falls inside the shared window

#: Opcode families (text before the first ".") that can access shared memory.
FAMILIES = mnemonics("shared") + mnemonics("window")

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
#: 64-bit emulated atomics (ATOMS.CAST.SPIN: it serves a conflict-free subset of its lanes, the loop retries
#: the rest) are named by their first modifier.
_ATOMIC_MODIFIERS = {"POPC": "popc_inc", "CAS": "cas", "CAST": "cas_spin", "ADD": "add", "INC": "inc", "DEC": "dec",
                     "EXCH": "exch", "MIN": "min", "MAX": "max", "AND": "and", "OR": "or", "XOR": "xor"}


def atomic_operation(modifiers: list[str]) -> str | None:
    """The operation an atomic's modifiers name (None: none, e.g. ``ATOMS.ARRIVE``)."""
    return next((_ATOMIC_MODIFIERS[m] for m in modifiers if m in _ATOMIC_MODIFIERS), None)


@lru_cache(maxsize=4096)
def shared_op(opcode: str) -> SharedOp | None:
    """The shared-memory access an opcode performs, or None if it never touches shared memory."""
    family, *modifiers = opcode.upper().split(".")
    entry = OPCODES.get(family)
    if entry is None or entry.role not in ("shared", "window"):
        return None
    kind, width = entry.access
    space = ALWAYS if entry.role == "shared" else IN_WINDOW
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


def uncounted_op(opcode: str) -> tuple[str, str] | None:
    """(label, why) for a SASS opcode of shared-memory work that is not counted (:data:`traceconf.kinds.UNCOUNTED`)."""
    entry = OPCODES.get(opcode.upper().split(".")[0])
    return (entry.detail, UNCOUNTED[entry.detail]) if entry is not None and entry.role == "tensor" else None


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
    entry = OPCODES.get(family)
    if entry is None or entry.role not in ("window", "global") or entry.access[0] == "cp_async":
        return None
    kind = entry.access[0]
    width, signed, is_float = element_of(modifiers)
    op = (atomic_operation(modifiers) or "add") if kind == "atom" else ""
    return GlobalOp(kind, width, signed, is_float, op, kind != "st" and "noresult" not in entry.flags)


def reads_into_registers(mnemonic: str) -> bool | None:
    """For a memory instruction the emulator cannot follow: whether it loads into registers (True: they become
    unknown) or only stores (False); None for other instructions."""
    entry = OPCODES.get(mnemonic)
    if entry is None:
        return None
    if entry.role in ("load", "store"):
        return entry.role == "load"
    if entry.access is None:
        return None
    return entry.access[0] in ("ld", "ldmatrix", "atom") and "noresult" not in entry.flags


def writes_memory(opcode: str) -> bool:
    """Whether the instruction (``LDS.U.128``: opcode and modifiers) may store to shared or global memory."""
    shared, other = shared_op(opcode), global_op(opcode)
    entry = OPCODES.get(opcode.upper().split(".")[0])
    return (shared is not None and shared.kind in ("st", "atom", "stmatrix", "cp_async")) or \
        (other is not None and other.kind != "ld") or (entry is not None and "writes" in entry.flags) or \
        (entry is not None and entry.role == "local" and entry.access[0] == "st")
