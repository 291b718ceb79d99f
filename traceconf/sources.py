"""CUDA (or Python) source files named by line info: where they are, and what a kernel's declaration says.

One home for reading the user's source next to the analysis: a name from ``.file``/line info is resolved
against the input's folder, then the working directory (compilers record the path as given on their command
line); unreadable files are None, never an error (the source is optional: the analysis never needs it).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path


def source_candidates(name: str, input_path: str | Path | None) -> list[Path]:
    """Where a line-info name is looked for, in order (reports name them when none exists)."""
    recorded = Path(name)
    folder = Path(input_path).parent if input_path else Path.cwd()
    candidates = [recorded] if recorded.is_absolute() else [folder / recorded, Path.cwd() / recorded]
    return candidates + [folder / recorded.name]     # compiled elsewhere, the source copied beside the input


def toolkit_header(name: str | None) -> bool:
    """Whether a line-info file is a header of the toolkit (``…/include/device_atomic_functions.hpp``): code it
    holds was inlined into the user's line, where a report should place it."""
    path = (name or "").replace("\\", "/")
    return "/include/" in path and path.endswith((".h", ".hpp", ".cuh"))


def resolve_source(name: str | None, input_path: str | Path | None) -> Path | None:
    """The readable file a line-info name stands for, or None."""
    if not name:
        return None
    return next((path for path in source_candidates(name, input_path) if path.is_file()), None)


@lru_cache(maxsize=64)
def _lines(path: Path, stamp: float) -> tuple[str, ...]:
    try:
        return tuple(path.read_text(errors="replace").splitlines())
    except OSError:
        return ()


def source_lines(path: Path) -> tuple[str, ...]:
    """The file's lines (cached per modification time)."""
    try:
        return _lines(path, path.stat().st_mtime)
    except OSError:
        return ()


def declared_parameters(path: Path, function: str, line: int, count: int) -> list[str] | None:
    """The parameter names of the last declaration of ``function`` that starts at or above ``line`` (the
    kernel's first line with code), when it declares exactly ``count`` parameters; else None."""
    text = "\n".join(source_lines(path)[:max(line, 1) + 1])
    found = [m for m in re.finditer(rf"\b{re.escape(function)}\s*\(", text)]
    for match in reversed(found):
        start = match.end()
        depth, end = 1, start
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        if depth or "__global__" not in text[max(0, match.start() - 300):match.start()]:
            continue
        names = [_parameter_name(part) for part in _split_top_level(text[start:end - 1])]
        names = [name for name in names if name is not None]
        if len(names) == count and all(names):
            return names
    return None


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "<([":
            depth += 1
        elif char in ">)]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def _parameter_name(declaration: str) -> str | None:
    """``const float *__restrict__ idata`` → ``idata``; ``void`` and unnamed parameters → None / ''."""
    declaration = re.sub(r"/\*.*?\*/|//[^\n]*", " ", declaration).split("=")[0]
    declaration = re.sub(r"\[[^\]]*\]", " ", declaration).strip()
    if declaration in ("", "void"):
        return None
    words = re.findall(r"[A-Za-z_]\w*", declaration)
    if len(words) < 2 or words[-1] in ("const", "restrict", "__restrict__", "volatile"):
        return ""
    return words[-1]


def with_source_names(row: dict, instructions: list[dict], input_path: str | Path | None) -> dict:
    """The kernel declaration ``row`` with each parameter's ``source_name`` from the CUDA source its line info
    names (nvcc's PTX keeps only ``_Z…_param_N``), where the source is readable and declares as many."""
    from traceconf.names import function_name

    params = row.get("params") or []
    if not params or any(p.get("source_name") for p in params):
        return row
    tried = set()
    for instruction in instructions:
        name, line = instruction.get("source_file"), instruction.get("source_line")
        if not name or not line or name in tried:
            continue
        tried.add(name)
        path = resolve_source(name, input_path)
        found = declared_parameters(path, function_name(row["kernel"]), int(line), len(params)) if path else None
        if found:
            return {**row, "params": [{**p, "source_name": source} for p, source in zip(params, found)]}
    return row
