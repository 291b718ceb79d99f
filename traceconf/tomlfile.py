"""TOML input files (rule sets, launch files): read them, and point at the line of a key.

Every way reading can fail (missing, unreadable, not UTF-8, not TOML, nested past the parser's recursion
limit) becomes one :class:`~traceconf.errors.InputError` located as precisely as the parser allows.
``tomllib`` keeps no positions, so :func:`key_line` finds where a key is written (the line of its
assignment or table header) for messages about valid TOML that breaks a file's own schema.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from traceconf.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def parse_toml(text: str, path: str, error: type[InputError] = InputError) -> dict:
    """The document's tables; a syntax error becomes ``error`` at the parser's line and column."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        line, column = (int(match.group(1)), int(match.group(2))) if match else (None, None)
        lines = text.splitlines()
        source = lines[line - 1] if line and line <= len(lines) else None
        raise error(f"not valid TOML: {message}", path, line, column, source) from None
    except RecursionError:
        raise error("not valid TOML: nested too deeply", path) from None


def read_toml(path: str | Path, error: type[InputError] = InputError) -> tuple[str, dict]:
    """(text, tables) of a TOML file."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", str(path)) from None
    except UnicodeDecodeError as exc:
        raise error(f"not a TOML file: byte {exc.start} is not UTF-8 text", str(path)) from None
    return text, parse_toml(text, str(path), error)


def key_line(text: str, key: str, after: int = 0) -> int | None:
    """1-based line where ``key`` (its last dotted part, without an index) is assigned or its table starts,
    the first one after line ``after``."""
    leaf = key.split(".")[-1].split("[")[0]
    pattern = re.compile(rf"^\s*(\[\[?\s*{re.escape(leaf)}\s*\]\]?|\"?{re.escape(leaf)}\"?\s*=)")
    for number, line in enumerate(text.splitlines(), 1):
        if number > after and pattern.match(line):
            return number
    return None
