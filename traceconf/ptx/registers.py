"""The registers a scope declares, with their types: one lookup for every reader of ``.reg`` declarations.

A function body declares single registers (``.reg .pred p;``) and numbered ranges (``.reg .b32 %r<9>;``:
``%r0`` to ``%r8``); a register's name in an operand may carry a component (``%r1.x``).  The table builder
asks whether a bare name is a register, the scoped-block renaming which registers a block declares, and
the emulator which type a register was declared with (a cp.async's fourth operand: an ignore-src predicate
or a src-size register).
"""

from __future__ import annotations

import re

_NUMBERED = re.compile(r"(.*?)(\d+)$")


class DeclaredRegisters:
    """Register names and ``%r<N>`` ranges of one scope, with their declared types."""

    def __init__(self, declarations=()):
        self.names: dict[str, str] = {}
        self.ranges: dict[str, tuple[int, str]] = {}      # prefix -> (N of prefix<N>, type)
        for declaration in declarations:
            self.declare(declaration["name"], declaration["type"], declaration["count"])

    def declare(self, name: str, type_: str | None, count: int) -> None:
        # `x<1>` declares x0 and a plain `x` declares x: count 1 cannot tell them apart
        self.ranges[name] = (count, type_ or "")
        if count == 1:
            self.names[name] = type_ or ""

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def type_of(self, name: str) -> str | None:
        """The declared type of register ``name`` (``pred``, ``b32``, ...; "" if none is written), None where this
        scope does not declare it."""
        base = name.split(".", 1)[0]
        if base in self.names:
            return self.names[base]
        numbered = _NUMBERED.match(base)
        if numbered is None:
            return None
        count, type_ = self.ranges.get(numbered.group(1), (0, None))
        return type_ if int(numbered.group(2)) < count else None

    def declares(self, name: str) -> bool:
        return self.type_of(name) is not None
