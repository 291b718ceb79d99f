"""CUDA source lines for the reports, when the file named by ``.loc`` is readable.

``.loc`` paths are usually absolute paths on the machine that compiled the
kernel; when that path does not exist here we also look next to the analysed
input (the common case of a ``.cu`` shipped beside its ``.ptx``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=64)
def _lines(path: str) -> tuple[str, ...] | None:
    try:
        return tuple(Path(path).read_text(errors="replace").splitlines())
    except OSError:
        return None


def source_text(source_file: str | None, source_line: int | None, input_path: str) -> str | None:
    """The stripped text of ``source_file:source_line``, or None when it cannot be read."""
    if not source_file or source_line is None or source_line < 1:
        return None
    here = Path(input_path).parent
    candidates = [Path(source_file), here / source_file, here / Path(source_file).name]
    for candidate in candidates:
        lines = _lines(str(candidate))
        if lines is not None:
            return lines[source_line - 1].strip() if source_line <= len(lines) else None
    return None
