"""The one error type users see.

Every stage raises :class:`InputError` for bad input; the CLI prints it as one
line ``FILE:LINE:COL: message`` (plus the offending source line when known) and
exits with status 2, never with a traceback.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator


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
        # a file name holding a line break or another unprintable character, or starting or ending in a space, is
        # quoted (escaped): the message stays one line and the name is seen whole (a shell variable, a fuzzed
        # argument)
        name = None if self.file is None else str(self.file)
        file = name if name is None or name.isprintable() and name == name.strip() else repr(name)
        parts = [p for p in (file, self.line, self.column) if p is not None]
        return ":".join(str(p) for p in parts)

    def __str__(self) -> str:
        where = self.location()
        return f"{where}: {self.message}" if where else self.message


#: Exit statuses of every command (``docs/reports.md`` lists them): bad input is the user's to fix,
#: an internal error is ours (a bug: the message asks for a report).
EXIT_OK, EXIT_GATE, EXIT_INPUT, EXIT_UNVERIFIABLE, EXIT_INTERNAL = 0, 1, 2, 3, 70

#: What libraries raise on malformed or hostile *data*: undecodable text, corrupt or truncated compressed or
#: Parquet files (OSError, EOFError, ArrowInvalid is a ValueError), numbers too large for their field,
#: nesting too deep to follow, an input that asks for more memory than there is.  Raised while one input is
#: read, these are that input's fault; anything else (KeyError, TypeError ...) is a bug of ours.
BUILTIN_DATA_ERRORS: tuple[type[BaseException], ...] = (UnicodeError, OSError, EOFError, ValueError, OverflowError,
                                                         RecursionError, MemoryError)
#: The error classes of the libraries that read our inputs, as (module, class): Arrow's base class (a damaged
#: Parquet file can raise ArrowTypeError, ArrowNotImplementedError, ArrowCapacityError ...), a damaged
#: .tracez frame, an .xz stream, a packed binary record, a CSV row the csv module refuses.  Named here, never
#: imported here: a library that was never imported raised nothing, and importing pyarrow only to name its
#: error would slow every command.
LIBRARY_DATA_ERRORS = (("pyarrow", "ArrowException"), ("zstandard", "ZstdError"), ("lzma", "LZMAError"),
                       ("struct", "error"), ("zlib", "error"), ("csv", "Error"))


def data_errors() -> tuple[type[BaseException], ...]:
    """Every class that means "this input's data is bad" (the builtin ones and those of the libraries loaded
    so far): the one list the input boundaries catch."""
    loaded = tuple(getattr(sys.modules[module], name) for module, name in LIBRARY_DATA_ERRORS
                   if module in sys.modules and hasattr(sys.modules[module], name))
    return BUILTIN_DATA_ERRORS + loaded


def data_error_message(error: BaseException) -> str:
    """One readable line for a library's data error (never a repr of the data it was reading)."""
    if isinstance(error, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start})"
    if isinstance(error, RecursionError):
        return "nested too deeply to read"
    if isinstance(error, MemoryError):
        return "needs more memory than this machine has"
    if isinstance(error, OSError) and error.strerror:
        return f"cannot read: {error.strerror}"
    text = " ".join(str(error).split())
    if len(text) > 200:
        text = text[:200] + "…"
    return f"cannot read: {text or type(error).__name__}"


def as_input_error(error: BaseException, file: str | None = None) -> InputError:
    """``error`` as an InputError located at ``file`` (an InputError is kept as it is: its own location is
    more precise, and one without a file is about an option, not the input)."""
    if isinstance(error, InputError):
        return error
    converted = InputError(data_error_message(error), file=file)
    converted.__cause__ = error          # kept for --debug and the fuzz harness, never printed
    return converted


@contextmanager
def reading(source: str | None, line: int | None = None) -> Iterator[None]:
    """The one place a library's data error becomes a located message: whatever :func:`data_errors` the
    block raises is an InputError at ``source`` (the file, or the option such as ``--data 0``, whose value
    was being read; ``line`` where known).  An InputError passes as it is: its own location is more precise."""
    try:
        yield
    except data_errors() as error:
        located = as_input_error(error, source)
        located.line = line
        raise located


def internal_message(error: BaseException) -> str:
    text = " ".join(str(error).split())[:200]
    return (f"internal error ({type(error).__name__}{': ' + text if text else ''}); this is a bug in traceconf, "
            "please report it with the input (run with --debug for the traceback)")
