"""Plain records the PTX transformer produces and the table builder consumes.

Both parse paths (whole-file Lark parse and the statement cache) yield exactly
these records, so the tables cannot depend on which path ran.  Records that
carry a ``line`` are re-based when a cached statement is reused at another line.
"""

from __future__ import annotations

from typing import NamedTuple

from traceconf.ptx.opcodes import OpcodeInfo


class Operand(NamedTuple):
    """One operand; field order and meaning are those of ``schemas.OPERAND_TYPE``.

    ``kind`` is provisional ``name`` for a bare identifier until the table
    builder knows the function's registers and labels (reg, label or symbol).
    """

    kind: str
    name: str | None
    value: int | None
    fvalue: float | None
    elements: tuple[str, ...] | None
    text: str


class Instruction(NamedTuple):
    line: int
    guard: str | None
    guard_negated: bool
    info: OpcodeInfo
    operands: tuple[Operand, ...]
    text: str


class Label(NamedTuple):
    name: str


class Scope(NamedTuple):
    """The start (``opens``) or end of a nested ``{ ... }`` block: registers declared in it are its own."""

    opens: bool


OPEN_SCOPE, CLOSE_SCOPE = Scope(True), Scope(False)


class Loc(NamedTuple):
    file: int
    line: int
    column: int
    # ``inlined_at F L C``: the line the inlined function was called from (atomicAdd's header line is inlined
    # at the user's call); 0 when the code is not inlined
    call_file: int = 0
    call_line: int = 0


class Variable(NamedTuple):
    """One declarator of a ``.reg/.shared/.global/.local/.const/.param`` declaration."""

    line: int
    space: str                  # reg | shared | global | ... (``::cta`` stripped)
    name: str
    type: str | None            # b32, f32, v4.f32 ...
    bytes: int                  # element size x vector x array length (0 for extern [])
    align: int                  # explicit .align, else the natural alignment
    count: int                  # N of %r<N>, else 1
    array: int | None           # total element count of an array, None for a scalar
    linkage: tuple[str, ...]    # visible / extern / weak / common
    initial: tuple | None = None  # the initialiser's numbers (int or float) in order; None: none written


class Parameter(NamedTuple):
    name: str
    type: str | None
    bytes: int
    align: int
    ptr_space: str | None
    array: int | None


class Function(NamedTuple):
    line: int
    name: str
    entry: bool
    visibility: str | None
    returns: tuple[Parameter, ...]
    params: tuple[Parameter, ...]
    performance: tuple[tuple[str, tuple[int, ...]], ...]
    body: list | range | None   # records in source order (as parsed), then its items in the file's
                                # :class:`traceconf.ptx.bodies.Bodies`; None for a prototype


class Version(NamedTuple):
    text: str


class Target(NamedTuple):
    names: tuple[str, ...]


class AddressSize(NamedTuple):
    bits: int


class FileDecl(NamedTuple):
    index: int
    path: str


class DumpLine(NamedTuple):
    """A line of a ``cuobjdump -ptx`` header block."""

    line: int
    text: str


#: Records whose ``line`` must be shifted when a cached statement is reused.
LINED = (Instruction, Variable, Function, DumpLine)
