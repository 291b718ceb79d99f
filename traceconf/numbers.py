"""The one number reader: text to a number, every failure one InputError naming where the text came from.

``source`` is the file (with ``line``/``column`` where known) or the option (``--param n``, ``--data 0``)
that holds the text, so a bad value in an ncu CSV, a stats file or an option is never pinned on the PTX
input being analysed.  Ranges are checked here too: a number that parses but cannot mean what it is read
for (a count past 2^63, a .u16 parameter of 70000) is the same kind of error as one that does not parse.
"""

from __future__ import annotations

import math

from traceconf.errors import InputError

#: The largest values an int32 and an int64 column hold.
INT32_MAX, INT64_MAX = (1 << 31) - 1, (1 << 63) - 1


def check_int(value: int, source: str | None, *, what: str = "value", text: str | None = None,
              low: int | None = None, high: int | None = None, line: int | None = None,
              column: int | None = None) -> int:
    """``value`` itself if it lies in ``[low, high]`` (either end open when None), else a located error."""
    if (low is not None and value < low) or (high is not None and value > high):
        shown = text if text is not None else str(value)
        bounds = f"{low if low is not None else '…'}..{f'{high:,}' if high is not None else '…'}"
        raise InputError(f"{what} {shown} is out of range: it must be {bounds}", source, line, column)
    return value


def read_int(text: str, source: str | None, *, what: str = "value", low: int | None = None,
             high: int | None = None, line: int | None = None, column: int | None = None, base: int = 0) -> int:
    """A whole number written in decimal, ``0x`` hex, ``0o`` or ``0b`` (``_`` separators allowed); with
    ``base=16`` hex with or without its ``0x``."""
    cleaned = text.strip().replace("_", "")
    try:
        value = int(cleaned, base)
    except ValueError:
        form = "hex" if base == 16 else "decimal or 0x hex"
        raise InputError(f"{what} {text.strip()!r} is not a whole number ({form})", source, line, column) from None
    return check_int(value, source, what=what, text=text.strip(), low=low, high=high, line=line, column=column)


def read_count(text: str, source: str | None, *, what: str = "count", line: int | None = None,
               column: int | None = None, empty: int | None = 0) -> int | None:
    """A measured count as tools print it: thousands separators, a decimal or exponent form (``1.5e+06``);
    empty, ``-`` or ``n/a`` is ``empty``.  It must be finite and fit an int64 column."""
    cleaned = (text or "").strip().replace(",", "")
    if not cleaned or cleaned.lower() in ("-", "n/a", "nan"):
        return empty
    try:
        value = int(cleaned) if cleaned.lstrip("+-").isdigit() else float(cleaned)
    except ValueError:
        raise InputError(f"{what} {text.strip()!r} is not a number", source, line, column) from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"{what} {text.strip()!r} is not a finite number", source, line, column)
        value = int(value)
    return check_int(value, source, what=what, text=text.strip(), low=-INT64_MAX - 1, high=INT64_MAX, line=line,
                     column=column)
