"""Function bodies in compact form: what both parse paths hand the table builder.

A body is a run of *items*, each an *entry* at a PTX line; an entry is zero or
more *atoms* — an instruction (its fields after the line), a ``.loc``, a label
or a declaration — each with its line offset within the entry.  Compiled PTX
repeats a few thousand distinct lines, so the statement cache makes one entry
per distinct line text and one item per line (an id in a list), and the table
builder turns the ids into columns with array operations; the whole-file Lark
parse makes one entry per record.  Either way the atoms hold the records that
:mod:`traceconf.ptx.transform` builds, so the tables cannot depend on the path.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from traceconf.ptx.records import Function, Instruction, Label, Loc, Scope, Variable

#: Atom kinds (a nested ``{`` and its ``}`` are atoms too: registers declared between them are scoped).
INSTRUCTION, LOC, LABEL, VARIABLE, SCOPE_OPEN, SCOPE_CLOSE = range(6)
_KINDS = {Loc: LOC, Label: LABEL, Variable: VARIABLE}
#: The entry of a line that holds nothing by itself (blank, '{', a statement's continuation).
EMPTY = 0


class Bodies:
    """Atoms, entries and items of every function body of one file."""

    def __init__(self):
        self.atoms: list = []                       # instruction fields tuple, Loc, Label or Variable
        self.kinds: list[int] = []
        self.entries: list[tuple[tuple[int, int], ...]] = [()]   # (atom, line offset) ...
        self.items: list[int] = []                  # entry id per item, all bodies one after another
        self._lines: list[np.ndarray] = []          # PTX line per item, one array per body

    def instruction(self, fields: tuple) -> int:
        """A new entry holding one instruction (fields after ``line``)."""
        self.atoms.append(fields)
        self.kinds.append(INSTRUCTION)
        self.entries.append(((len(self.atoms) - 1, 0),))
        return len(self.entries) - 1

    def entry(self, records: list, prefix: tuple = ()) -> int:
        """A new entry holding ``records`` whose lines count from 1 (this entry's line), after the
        atoms of ``prefix`` (an entry id's atoms, or ())."""
        atoms = list(self.entries[prefix]) if prefix else []
        for record in records:
            kind = type(record)
            if kind is Instruction:
                self.atoms.append(tuple(record)[1:])
                self.kinds.append(INSTRUCTION)
                atoms.append((len(self.atoms) - 1, record.line - 1))
            elif kind in _KINDS or kind is Scope:
                self.atoms.append(record)
                self.kinds.append(_KINDS[kind] if kind is not Scope else SCOPE_OPEN if record.opens else SCOPE_CLOSE)
                atoms.append((len(self.atoms) - 1, 0))
        self.entries.append(tuple(atoms))
        return len(self.entries) - 1

    def joined(self, first: int, second: int) -> int:
        """A new entry: the atoms of entry ``first`` then those of ``second`` (same line)."""
        if first == EMPTY:
            return second
        self.entries.append(self.entries[first] + self.entries[second])
        return len(self.entries) - 1

    def add_lines(self, entries: list[int], first_line: int) -> range:
        """A body given as one entry per line, the first at ``first_line``: its items."""
        start = len(self.items)
        self.items += entries
        self._lines.append(np.arange(first_line, first_line + len(entries), dtype=np.int64))
        return range(start, len(self.items))

    def add_records(self, records: list) -> range:
        """A body given as records (absolute lines): one entry per record."""
        start = len(self.items)
        lines = []
        for record in records:
            if type(record) is Instruction:
                self.items.append(self.entry([record._replace(line=1)]))
                lines.append(record.line)
            else:                       # only instructions use their line
                self.items.append(self.entry([record]))
                lines.append(0)
        self._lines.append(np.asarray(lines, dtype=np.int64))
        return range(start, len(self.items))

    def compact(self, records: list) -> list:
        """``records`` with every function body (a list of records) replaced by its items."""
        return [r._replace(body=self.add_records(r.body)) if type(r) is Function and type(r.body) is list else r
                for r in records]

    def expanded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(atom id, PTX line) of every atom of every item in order, and where each item's
        atoms start (one more than there are items: the last is the total)."""
        counts = np.fromiter(map(len, self.entries), np.int64, len(self.entries))
        firsts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        pairs = np.fromiter(chain.from_iterable(chain.from_iterable(self.entries)), np.int64,
                            2 * int(counts.sum())).reshape(-1, 2)
        flat_atoms, flat_offsets = pairs[:, 0], pairs[:, 1]
        items = np.asarray(self.items, dtype=np.int64)
        lines = np.concatenate(self._lines) if self._lines else np.zeros(0, np.int64)
        per_item = counts[items]
        item_starts = np.concatenate([[0], np.cumsum(per_item)])
        total = int(item_starts[-1])
        item_of = np.repeat(np.arange(len(items)), per_item)
        flat_index = firsts[items][item_of] + np.arange(total) - item_starts[:-1][item_of]
        return flat_atoms[flat_index], lines[item_of] + flat_offsets[flat_index], item_starts
