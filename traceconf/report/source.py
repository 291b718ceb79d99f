"""One CUDA (or Python, for Triton) source line for the reports, when the file the line info names is readable
(:mod:`traceconf.sources` finds and reads it: the input's folder, then the working directory, then the bare
name beside the input)."""

from __future__ import annotations

from traceconf.sources import resolve_source, source_lines


def source_text(source_file: str | None, source_line: int | None, input_path: str) -> str | None:
    """The stripped text of ``source_file:source_line``, or None when it cannot be read."""
    path = resolve_source(source_file, input_path) if source_line is not None and source_line >= 1 else None
    lines = source_lines(path) if path is not None else ()
    return lines[source_line - 1].strip() if source_line is not None and 0 < source_line <= len(lines) else None
