"""Launch files: every kernel's launch written once, for every command (``--launches launches.toml``).

Format (TOML; docs/launches.md)::

    # one [[launch]] per kernel; `kernel` selects like --kernel (exact, demangled, function name, part, regex)
    [[launch]]
    kernel = "transpose_unpadded"
    block = [32, 8]              # or 256; default: the kernel's .reqntid / .maxntid
    grid = [32, 32]              # default 1
    params = { width = 1024, height = 1024 }   # by PTX name, source name or 0-based index ("2" = 1024)
    dynamic_smem = 0             # bytes of extern shared memory
    ctas = 16                    # optional: sample N CTAs
    max_steps = 10_000_000       # optional

The first entry that selects a kernel describes its launch; options given on the command line win over
the file (``--param`` adds to and overrides the file's ``params``).  Without ``--kernel``, the kernels the
file names are the ones analysed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from traceconf.errors import InputError
from traceconf.names import KernelPattern
from traceconf.tomlfile import key_line, read_toml

_KEYS = ("kernel", "block", "grid", "params", "dynamic_smem", "ctas", "max_steps")


@dataclass(frozen=True)
class LaunchEntry:
    """One ``[[launch]]``: the kernel pattern and the launch facts it sets (None: not set)."""

    kernel: str
    block: tuple[int, int, int] | None = None
    grid: tuple[int, int, int] | None = None
    params: dict[str, int] = field(default_factory=dict)
    dynamic_smem: int | None = None
    ctas: int | None = None
    max_steps: int | None = None

    def selects(self, name: str) -> bool:
        return KernelPattern(self.kernel).tier(name) is not None


def read_launch_file(path: str | Path) -> tuple[LaunchEntry, ...]:
    """The entries of a launch file, validated; errors name the file, the line and the key."""
    path = str(path)
    if not path.strip():      # an unset variable in a job script: no file to name, so name the option
        raise InputError(f"no file named: the value is blank ({path!r})", "--launches")
    text, data = read_toml(path)
    unknown = sorted(set(data) - {"launch"})
    if unknown:
        raise _error(text, path, unknown[0], "unknown table (a launch file holds [[launch]] entries)")
    entries = data.get("launch")
    if not isinstance(entries, list) or not entries:
        raise InputError("no [[launch]] entries", path, 1, 1)
    out, after = [], 0
    for index, entry in enumerate(entries):
        after = key_line(text, "launch", after) or after
        out.append(_entry(entry, text, path, after))
    return tuple(out)


def _error(text: str, path: str, key: str, message: str, after: int = 0) -> InputError:
    line = key_line(text, key, after)
    source = text.splitlines()[line - 1] if line else None
    return InputError(f"key {key!r}: {message}", path, line, 1 if line else None, source)


def _entry(entry: dict, text: str, path: str, after: int) -> LaunchEntry:
    def fail(key: str, message: str) -> InputError:
        return _error(text, path, key, message, after)

    unknown = sorted(set(entry) - set(_KEYS))
    if unknown:
        raise fail(unknown[0], f"unknown key (allowed: {', '.join(_KEYS)})")
    kernel = entry.get("kernel")
    if not isinstance(kernel, str) or not kernel.strip():
        raise fail("launch", "every [[launch]] needs kernel = \"NAME_OR_PATTERN\"")
    facts = {"kernel": kernel}
    for key in ("block", "grid"):
        if key in entry:
            facts[key] = _dims(entry[key], key, fail)
    if "params" in entry:
        params = entry["params"]
        if not isinstance(params, dict) or not all(_is_int(v) for v in params.values()):
            raise fail("params", "expected a table NAME_OR_INDEX = integer")
        facts["params"] = {str(k): int(v) for k, v in params.items()}
    for key, low in (("dynamic_smem", 0), ("ctas", 1), ("max_steps", 1)):
        if key in entry:
            value = entry[key]
            if not _is_int(value) or value < low:
                raise fail(key, f"expected an integer of at least {low}, got {value!r}")
            facts[key] = int(value)
    return LaunchEntry(**facts)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _dims(value, key: str, fail) -> tuple[int, int, int]:
    values = [value] if _is_int(value) else value
    if not isinstance(values, list) or not 1 <= len(values) <= 3 or not all(_is_int(v) and v >= 1 for v in values):
        raise fail(key, f"expected 1 to 3 positive integers (X or [X, Y, Z]), got {value!r}")
    return tuple(values) + (1,) * (3 - len(values))  # type: ignore[return-value]
