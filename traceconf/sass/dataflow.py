"""Does a value read from shared memory reach a decision?  A backward dataflow over a SASS kernel.

The SASS emulator keeps shared memory's contents (what STS stored, what LDS and the atomics read back) only
when a shared read can decide where control goes: when the register it writes is, at that point, *relevant*,
i.e. reaches through some path of computations the condition of a branch (or exit) before being overwritten.
ptxas's CAS retry loop for 64-bit atomics is the case in point: the ATOMS.CAST.SPIN result decides the branch
back to its LDS.64.  Everywhere else a shared read stays an unknown loaded value, as before (an address or a
guard computed from one is reported unresolved), and CTA classes keep their affine shared addresses
(:mod:`traceconf.sass.classes`).  ptxas reuses physical registers, so relevance is followed along the control
flow (a flow-insensitive closure would join unrelated lifetimes of one register); guards are not followed, so
a guarded write never hides an older value.  Erring either way is safe: a value not kept is only ever unknown,
never wrong.
"""

from __future__ import annotations

from traceconf.emulate.slice import Effect
from traceconf.sass.classes import alu_destinations
from traceconf.sass.opcodes import global_op, opcode_of, shared_op, transfer, uncounted_op
from traceconf.sass.operands import ZERO_REGS, TRUE_PREDICATES, Operand, pair_name, parse_operand

#: Shared accesses whose destinations receive what shared memory held.
READS = frozenset({"ld", "ldmatrix", "atom"})


#: The memory spaces an access of each memory role may touch (a role not here: an unmodelled space).
ROLE_SPACES = {"shared": frozenset({"shared"}), "window": frozenset({"shared", "global"}),
               "global": frozenset({"global"}), "local": frozenset({"local"})}
#: Roles whose instructions access memory (``load``/``store``: spaces the emulator does not model).
MEMORY_ROLES = frozenset(ROLE_SPACES) | {"load", "store"}
#: Access kinds (and the ``load``/``store`` roles) whose destinations receive memory's contents, and those that
#: change memory; a cp_async copies global memory into shared memory.
LOADING_KINDS = READS | {"load"}
STORING_KINDS = frozenset({"st", "atom", "stmatrix", "cp_async", "store"})


#: ``PR`` / ``UPR`` name every predicate at once (``P2R R2, PR, R2, 0x4`` packs them, ``R2P PR, R2, 0x4`` unpacks).
PREDICATE_FILES = {"PR": frozenset(f"P{i}" for i in range(7)), "UPR": frozenset(f"UP{i}" for i in range(7))}


def _registers(op: Operand, count: int = 1) -> set[str]:
    """The registers an operand names: ``count`` consecutive ones from it (pairs of .64 operands included)."""
    if op.kind in ("address", "const"):
        names = [n for name, _, wide in op.registers for n in ([name, pair_name(name)] if wide else [name])]
    elif op.kind == "pred" and op.name:          # one predicate, whatever the width (LDGSTS's ignore-src, !PT)
        names = [op.name]
    elif op.kind == "reg" and op.name:
        names = [op.name]
        for _ in range(max(count, 2 if op.wide else 1) - 1):
            names.append(pair_name(names[-1]))
    else:
        return set()
    return {n for n in names if n not in ZERO_REGS and n not in TRUE_PREDICATES}


def _effect(row: dict, ops: list[Operand]) -> tuple[set, set, set, bool]:
    """(registers written, registers their values come from, registers that decide where control goes, shared
    read)."""
    family, mods = row["opcode"], list(row["modifiers"] or [])
    if transfer(family) is not None:
        guard = {row["guard"].lstrip("!")} - TRUE_PREDICATES if row.get("guard") else set()
        return set(), set(), guard | {n for op in ops if op.kind in ("pred", "reg") for n in _registers(op)}, False
    where = next((i for i, op in enumerate(ops) if op.kind == "address"), None)
    if where is not None:
        access = shared_op(".".join([family, *mods]))
        count = (access.matrices or max(1, access.bytes // 4)) if access else 1      # LDSM: a register per matrix
        written = {n for op in ops[:where] for n in _registers(op, count)}
        # an atomic's result also follows its operands (a CAS succeeds by its compare value)
        sources = {n for op in ops[where + 1:] for n in _registers(op, count)} if access and access.kind == "atom" \
            else set()
        return written, sources, set(), access is not None and access.kind in READS
    names, sources, inputs = alu_destinations(ops)
    written = set(names) | ({pair_name(names[0])} if "WIDE" in mods and names else set())
    return written, {n for op in sources + inputs for n in _registers(op)}, set(), False


def shared_values_matter(rows: list[dict], successors: list[list[int]]) -> bool:
    """True when the register some shared read writes is relevant right after it: it may decide a branch.
    ``successors[i]``: the instructions that may run after instruction ``i`` (the emulator's control flow)."""
    effects = [_effect(row, [parse_operand(text) for text in row["operands"] or []]) for row in rows]
    if not any(read for *_, read in effects):
        return False
    successors = [[j for j in following if j < len(rows)] for following in successors]   # past the end: exit
    predecessors: list[list[int]] = [[] for _ in rows]
    for i, following in enumerate(successors):
        for j in following:
            predecessors[j].append(i)
    relevant_in: list[set] = [set() for _ in rows]

    def relevant_out(i: int) -> set:
        return set().union(*(relevant_in[j] for j in successors[i]))

    todo, waiting = list(range(len(rows))), set(range(len(rows)))     # a worklist, last instruction first
    while todo:
        i = todo.pop()
        waiting.discard(i)
        written, sources, sinks, _ = effects[i]
        out = relevant_out(i)
        guarded = bool(rows[i].get("guard")) and rows[i]["guard"] not in TRUE_PREDICATES
        kept = out if guarded else out - written              # a guarded write may leave the old value
        new = kept | sinks | (sources if written & out else set())
        if new != relevant_in[i]:
            relevant_in[i] = new
            for j in predecessors[i]:
                if j not in waiting:
                    waiting.add(j)
                    todo.append(j)
    return any(read and written & relevant_out(i) for i, (written, _, _, read) in enumerate(effects))


#: Transfers whose register operand is a 64-bit address (a pair); the others' registers are masks or counts.
ADDRESS_TRANSFERS = frozenset({"indirect", "call", "return"})


def _width(family: str, mods: list[str]) -> int:
    """Registers per register operand, at most (a pair for 64-bit forms, four for 128-bit and matrix ones)."""
    entry = opcode_of(family)
    if "128" in mods or (entry is not None and entry.role == "matrix"):
        return 4
    if (entry is not None and "pairs" in entry.flags) or "WIDE" in mods or any("64" in m for m in mods):
        return 2
    if entry is not None and "hi_pair" in entry.flags and "HI" in mods:
        return 2
    return 1


def _named(ops: list[Operand], width: int) -> set:
    return {n for op in ops for n in _registers(op, width)}


def sass_effect(row: dict, written: tuple, global_data: bool) -> Effect:
    """What a SASS instruction reads and writes (:mod:`traceconf.emulate.slice`), erring towards more: a 64-bit
    ALU result's register gets its pair too (``CS2R R2, SRZ`` clears two), only the leading register of an integer
    or float result is taken as surely overwritten (with its pair where a .64 or .WIDE modifier says the result
    is 64 bits wide), an opcode the table does not know or whose memory effect
    it does not place runs, as do control transfers, comparisons (CTA-class decisions) and shared accesses.
    ``written``: the registers the emulator's semantics say it writes; ``global_data``: --data buffers are
    modelled (then every global access runs)."""
    family, mods = row["opcode"], list(row["modifiers"] or [])
    full = ".".join([family, *mods])
    ops = [parse_operand(text) for text in row["operands"] or []]
    entry = opcode_of(family)
    width = _width(family, mods)
    role = entry.role if entry is not None else None
    guard = {row["guard"].lstrip("!")} - TRUE_PREDICATES if row.get("guard") else set()
    # @!PT never runs: it must not be taken to overwrite anything
    guarded = bool(guard) or bool(row.get("guard")) and (row["guard"].startswith("!") or row.get("guard_negated"))
    names, sources, inputs = alu_destinations(ops)
    defs = set(written) | set(names)
    files = [PREDICATE_FILES.get(op.text, frozenset()) for op in ops]
    packed_in = frozenset().union(*files[1:])          # the predicates a P2R reads
    defs |= files[0] if files else frozenset()         # those an R2P may write (some: it kills none)
    first = written[0] if written else None
    if first and first.lstrip("U").startswith("R") and role not in ROLE_SPACES and (entry is None or width > 1):
        # a 64-bit result (.64, .WIDE, the table's ``pairs``: double precision, CS2R R2, SRZ) or an opcode the table
        # does not know: its pair may be written too (a 32-bit FADD's may not: taken so, it made reduce6's tid
        # register depend on its grid-stride loop)
        defs.add(pair_name(first))
    kills = frozenset({first} if first and role in ("int", "float") else ())
    if kills and len(written) > 1 and ("WIDE" in mods or "64" in mods):
        kills |= {written[1]}               # a result its modifier says is 64 bits wide: the pair (LDC.64 R8)
    where = next((i for i, op in enumerate(ops) if op.kind == "address"), None)
    shared, other = shared_op(full), global_op(full)
    if where is not None and role in MEMORY_ROLES:
        kind = shared.kind if shared else other.kind if other else entry.access[0] if entry.access else role
        defs |= _named(ops[:where], width)
        places = guard | _named([op for op in ops if op.kind == "address"], 1)
        values = _named([op for op in ops[where + 1:] if op.kind != "address"], width)
        spaces = ROLE_SPACES.get(role, frozenset({"unmodelled"}))
        reads = spaces if kind in LOADING_KINDS else frozenset({"global"}) if kind == "cp_async" else frozenset()
        writes = spaces if kind in STORING_KINDS else frozenset()
        seed = shared is not None or "writes" in entry.flags or (global_data and "global" in reads | writes)
        return Effect(defs=frozenset(defs), kills=kills, values=frozenset(values), places=frozenset(places),
                      reads=reads, writes=writes, seed=seed, loaded=bool(reads),
                      names_pointers=role == "global" and kind == "ld", guarded=guarded)
    if entry is None or role == "control" or role in MEMORY_ROLES \
            or entry.affine == "comparison" or "opaque" in entry.flags or "writes" in entry.flags \
            or uncounted_op(family):
        # what it reads: every register it names, but a comparison's destinations
        # (a transfer to an address in a register reads its pair: ``RET.REL.NODEC R4 `(k)`` returns to R4:R5; the
        # listing prints such operands without commas; a mask, ``WARPSYNC.COLLECTIVE R8``, is one register)
        read = _named(sources + inputs, width) if entry is not None and entry.affine == "comparison" \
            else _named([parse_operand(token) for op in ops for token in op.text.split()],
                        2 if entry.detail in ADDRESS_TRANSFERS else 1) if role == "control" \
            else _named(ops, width)
        return Effect(defs=frozenset(defs), kills=kills, places=frozenset(guard | read | packed_in), seed=True,
                      loaded=role == "load", guarded=guarded,
                      writes=frozenset({"shared", "global", "local"}) if entry is None or "writes" in entry.flags
                      or "opaque" in entry.flags else frozenset())
    return Effect(defs=frozenset(defs), kills=kills, values=frozenset(_named(sources + inputs, width) | packed_in),
                  places=frozenset(guard), guarded=guarded)
