"""The same file reached twice is one input.

A trace folder given twice, or a folder and its own ``kernelslist.g``, or a link to either, plans the same
kernel files twice; summed, every count would be doubled.  A unit of work is what it reads (the file, by
identity: links and ``..`` resolved, and its share of CTAs or row groups) and for which kernel, so a repeat
is dropped, with a note naming both spellings.  Two different files holding the same kernel are two inputs
and stay apart.
"""

from __future__ import annotations

import os
from typing import Protocol, Sequence, TypeVar


class PlannedUnit(Protocol):
    source: str
    path: str
    kernel: str | None
    part: tuple[int, int] | None


Unit = TypeVar("Unit", bound=PlannedUnit)


def file_identity(path: str) -> tuple:
    """What names one file whatever the spelling: device and inode where it exists, else the resolved path."""
    try:
        stat = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return ("inode", stat.st_dev, stat.st_ino)


def distinct_units(units: Sequence[Unit]) -> tuple[list[Unit], list[str]]:
    """``units`` without the repeats of an earlier unit (same file, share and kernel), and one note per pair of
    inputs that overlapped."""
    seen: dict[tuple, Unit] = {}
    kept: list[Unit] = []
    overlaps: dict[tuple[str, str], int] = {}
    for unit in units:
        key = (file_identity(unit.path), unit.part, unit.kernel)
        first = seen.get(key)
        if first is None:
            seen[key] = unit
            kept.append(unit)
        else:
            pair = (first.source, unit.source)
            overlaps[pair] = overlaps.get(pair, 0) + 1
    notes = [f"{again} reaches the same {count} kernel file(s) as {first}: counted once" if again != first else
             f"{first} is given more than once: counted once" for (first, again), count in overlaps.items()]
    return kept, notes
