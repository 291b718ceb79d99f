"""CUDA (or Python, for Triton) source lines for the reports, when the file the line info names is readable.

Line info (``.loc``/``.file``, nvdisasm's line table, a trace's) names files as the compiler saw them: an
absolute path on the machine that compiled the kernel, or a name relative to where it ran.  An absolute
path is read where it exists; a relative name is resolved against the analysed input's folder, then the
working directory; failing those, the file's bare name beside the input (the common case of a ``.cu``
shipped beside its ``.ptx``).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=64)
def _read(path: str, stamp: tuple[int, int]) -> tuple[str, ...] | None:
    try:
        return tuple(Path(path).read_text(errors="replace").splitlines())
    except OSError:
        return None


def _lines(path: str) -> tuple[str, ...] | None:
    """The file's lines, read once per version of the file (a long-lived process sees edits)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return _read(path, (status.st_mtime_ns, status.st_size))


def candidates(source_file: str, input_path: str) -> list[Path]:
    """Where ``source_file`` is looked for, in order (what a report names when none exists)."""
    here = Path(input_path).parent
    named = Path(source_file)
    found = [named] if named.is_absolute() else [here / named, Path.cwd() / named]
    return found + [here / named.name]


def find_source(source_file: str | None, input_path: str) -> Path | None:
    """The readable file the line info's ``source_file`` names, or None."""
    if not source_file:
        return None
    return next((c for c in candidates(source_file, input_path) if _lines(str(c)) is not None), None)


def source_lines(source_file: str | None, input_path: str) -> tuple[str, ...] | None:
    """Every line of the file the line info names, or None when it is nowhere to be read."""
    found = find_source(source_file, input_path)
    return _lines(str(found)) if found is not None else None


def source_text(source_file: str | None, source_line: int | None, input_path: str) -> str | None:
    """The stripped text of ``source_file:source_line``, or None when it cannot be read."""
    lines = source_lines(source_file, input_path) if source_line is not None and source_line >= 1 else None
    return lines[source_line - 1].strip() if lines is not None and source_line <= len(lines) else None
