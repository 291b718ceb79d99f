"""The one error type users see.

Every stage raises :class:`InputError` for bad input; the CLI prints it as one
line ``FILE:LINE:COL: message`` (plus the offending source line when known) and
exits with status 2, never with a traceback.
"""

from __future__ import annotations


class InputError(Exception):
    """Bad input, located as precisely as the stage can."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None,
                 column: int | None = None, source_line: str | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.source_line = source_line

    def location(self) -> str:
        parts = [p for p in (self.file, self.line, self.column) if p is not None]
        return ":".join(str(p) for p in parts)

    def __str__(self) -> str:
        where = self.location()
        return f"{where}: {self.message}" if where else self.message
