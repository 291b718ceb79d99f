"""The Python line of each PTX line of a Triton kernel, through inlined library calls.

Triton's line info is the innermost location: an access made inside
``tl.max`` or ``tl.sum`` is attributed to ``triton/language/standard.py``.
Its PTX writes the whole inlining chain in the comment of each ``.loc``
(``// standard.py:191:40 @[ softmax.py:85:19 ]``), innermost first; the line a
kernel author wrote is the innermost frame outside Triton's own library.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', re.M)
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+[^/\n]*(?://\s*(.*))?$")
_FRAME = re.compile(r"([^\s@\[\]]+):(\d+):\d+")


def _is_library(path: str, library: Path) -> bool:
    """Whether ``path`` is a file of Triton's package: here (``library``), or an installed one elsewhere (a
    harvested kernel names the paths of the machine that compiled it)."""
    parts = Path(path).parts
    installed = any(parts[i] in ("site-packages", "dist-packages") and parts[i + 1] == "triton"
                    for i in range(len(parts) - 1))
    return installed or Path(path).resolve().is_relative_to(library)


def python_lines(ptx: str, library: Path) -> dict[int, tuple[str, int]]:
    """PTX line (1-based) → (file, line) of the author's code, for the lines whose own location is inside
    ``library`` (Triton's package folder) and whose chain leaves it."""
    files = {int(number): path for number, path in _FILE.findall(ptx)}
    by_name: dict[str, str] = {}
    for path in files.values():
        by_name.setdefault(Path(path).name, path)
    library_paths: dict[str, bool] = {}       # a kernel names a few files in thousands of .loc lines

    def in_library(path: str) -> bool:
        if path not in library_paths:
            library_paths[path] = _is_library(path, library)
        return library_paths[path]
    out, current = {}, None
    for number, line in enumerate(ptx.splitlines(), 1):
        loc = _LOC.match(line)
        if loc:
            current = None
            path = files.get(int(loc.group(1)))
            if path and loc.group(3) and in_library(path):
                frames = [(by_name.get(name, name), int(row)) for name, row in _FRAME.findall(loc.group(3))]
                current = next((frame for frame in frames[1:] if not in_library(frame[0])), None)
        elif current is not None:
            out[number] = current
    return out


def triton_library() -> Path:
    import triton
    return Path(triton.__file__).resolve().parent


def with_python_lines(frame, ptx: str):
    """``frame`` (per-instruction results) with each row inside Triton's library moved to the author's line."""
    lines = python_lines(ptx, triton_library())
    if not lines or "ptx_line" not in frame:
        return frame
    found = [lines.get(int(ptx_line)) if ptx_line == ptx_line and ptx_line is not None else None
             for ptx_line in frame["ptx_line"]]
    moved = np.array([place is not None for place in found], dtype=bool)
    if not moved.any():
        return frame
    frame = frame.copy()
    places = [place for place in found if place is not None]
    # one assignment per column (a row at a time costs pandas' indexing machinery per row)
    for column, values in (("source_file", [file for file, _ in places]), ("source_line", [line for _, line in places]),
                           ("source", [f"{file}:{line}" for file, line in places])):
        frame.loc[moved, column] = pd.Series(values, index=frame.index[moved], dtype=frame[column].dtype) \
            if column in frame else values
    return frame
