"""Kernel and symbol names: demangling, and which kernels a ``--kernel`` pattern selects.

Every command, the Python API and the Nsight Compute comparison choose kernels
here and nowhere else.  A pattern selects a kernel, in this order of
preference (the first tier that selects any kernel wins when the whole list of
kernels is known, e.g. in a PTX file):

1. exact: the mangled name, the demangled name, or the demangled name without
   return type and parameters (``matmul_tiled<16>``);
2. the bare function name (``matmul_tiled``: every instantiation);
3. part of a name: a substring of the mangled or demangled name;
4. a regular expression found in the mangled name, the demangled one, or that without return type
   and parameters.

Demangling uses ``cxxfilt`` (the C++ runtime's own ``abi::__cxa_demangle``, so
names read exactly as ``c++filt`` prints them); a name that is not a mangled
C++ name is kept as it is.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache

from traceconf.errors import InputError

TIERS = ("exact", "function", "part", "regex")


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """``_Z12matmul_tiledILi16EEvPKfS1_Pfi`` → ``void matmul_tiled<16>(float const*, float const*, float*, int)``."""
    if not name.startswith("_Z"):
        return name
    import cxxfilt      # here: its import looks the C++ runtime up (two ldconfig runs), unmangled names need none

    try:
        return cxxfilt.demangle(name, external_only=False)
    except cxxfilt.InvalidName:
        return name


def _outer_split(text: str, opening: str, closing: str) -> tuple[str, str]:
    """(head, tail) where tail is the last top-level ``opening…closing`` group ending the text ('' if none)."""
    text = text.rstrip()
    if not text.endswith(closing):
        return text, ""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {closing: 1, opening: -1}.get(text[i], 0)
        if depth == 0:
            return text[:i], text[i:]
    return text, ""


@lru_cache(maxsize=65536)
def qualified_name(name: str) -> str:
    """Demangled name without return type and parameters: ``ns::matmul_tiled<16>`` (spacing as c++filt)."""
    text = demangle(name)
    for suffix in (" const", " volatile"):
        text = text.removesuffix(suffix)
    head, params = _outer_split(text, "(", ")")
    if not params:
        return text
    # The return type (templates only) ends at the last space outside <...> and (...).
    depth = 0
    for i in range(len(head) - 1, -1, -1):
        ch = head[i]
        if ch in ">)":
            depth += 1
        elif ch in "<(":
            depth -= 1
        elif ch == " " and depth == 0:
            return head[i + 1:]
    return head


@lru_cache(maxsize=65536)
def function_name(name: str) -> str:
    """Bare function name: ``_Z12matmul_tiledILi16EEvPKfS1_Pfi`` → ``matmul_tiled``;
    a local symbol ``_ZZ18transpose_unpaddedE4tile`` → ``tile``."""
    text = qualified_name(name)
    head, template = _outer_split(text, "<", ">")
    if template and not head.endswith("operator"):
        text = head
    depth, start = 0, 0
    for i, ch in enumerate(text):          # last '::' outside template arguments
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and text.startswith("::", i):
            start = i + 2
    return text[start:] or name


def readable(name: str) -> str:
    """A kernel as messages name it: demangled without parameters, the mangled name beside it to select
    exactly (``transpose_tile<0> (_Z14transpose_tileILi0EEvPfPKfi)``); a plain name as it is."""
    qualified = qualified_name(name)
    return name if qualified == name else f"{qualified} ({name})"


def short_name(name: str, width: int = 60) -> str:
    """A readable kernel name for headers: demangled without return type and parameters, template
    arguments collapsed to ``<…>`` from the innermost out while it is wider than ``width``."""
    text = qualified_name(name)
    while len(text) > width:
        # innermost argument lists: only plain text and already collapsed ``<…>`` inside
        inner = next((m for m in re.finditer(r"<((?:[^<>]|<…>)*)>", text) if m.group(1) != "…"), None)
        if inner is None:
            break
        text = text[:inner.start()] + "<…>" + text[inner.end():]
    return text if len(text) <= width else text[:width - 1] + "…"


def _unspaced(text: str) -> str:
    return re.sub(r"\s+", "", text)


def same_kernel(a: str, b: str) -> bool:
    """Whether two spellings (mangled, demangled as c++filt or Nsight Compute prints it) name one kernel."""
    if a == b:
        return True
    squeeze = lambda text: _unspaced(qualified_name(text).replace("const", ""))  # noqa: E731
    return squeeze(a) == squeeze(b)


@dataclass(frozen=True)
class KernelPattern:
    """One ``--kernel`` value."""

    text: str

    def tier(self, name: str) -> int | None:
        """Index into :data:`TIERS` of the best way this pattern selects ``name``, None if it does not."""
        pattern = self.text
        # spacing inside a demangled name is the demangler's choice, not the user's: ``tmpl<32,double>``
        # names ``tmpl<32, double>``
        squeezed, readable = _unspaced(pattern), (_unspaced(demangle(name)), _unspaced(qualified_name(name)))
        if pattern in (name, demangle(name), qualified_name(name)) or squeezed in readable:
            return 0
        if pattern == function_name(name):
            return 1
        if pattern in name or squeezed in readable[0]:
            return 2
        regex = self._regex()
        if regex is not None and any(regex.search(form) for form in (name, qualified_name(name), demangle(name))):
            return 3
        return None

    def _regex(self) -> re.Pattern | None:
        try:
            return re.compile(self.text)
        except re.error:
            return None


def matches(name: str, patterns: list[str] | None) -> bool:
    """Whether any pattern selects ``name`` (streamed inputs, where the other kernels are not known yet)."""
    return not patterns or any(KernelPattern(p).tier(name) is not None for p in patterns)


def select_kernels(names: list[str], patterns: list[str] | None, path: str | None = None,
                   unmatched: list[str] | None = None) -> list[str]:
    """The kernels of ``names`` that the patterns select (in file order); per pattern only its best tier.

    Raises :class:`InputError` for a pattern that selects nothing, with the closest names as a hint; with an
    ``unmatched`` list, such patterns are appended to it instead (a launch file or ``--kernel`` list shared by
    several inputs names kernels of the others) unless no pattern selects anything.
    """
    if not patterns:
        return list(names)
    chosen: set[str] = set()
    missed = []
    for text in patterns:
        pattern = KernelPattern(text)
        tiers = {name: pattern.tier(name) for name in names}
        found = [t for t in tiers.values() if t is not None]
        if not found:
            missed.append(text)
            continue
        chosen.update(name for name, t in tiers.items() if t == min(found))
    if missed and (unmatched is None or not chosen):
        raise InputError(no_match_message(missed[0], names), file=path)
    if unmatched is not None:
        unmatched += missed
    return [name for name in names if name in chosen]


def no_match_message(pattern: str, names: list[str], what: str = "kernel") -> str:
    readable = sorted({form for n in names for form in (qualified_name(n), function_name(n))})
    close = difflib.get_close_matches(pattern, readable, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    listing = ", ".join(qualified_name(n) for n in names[:20]) or "none"
    more = f" (and {len(names) - 20} more)" if len(names) > 20 else ""
    return f"no {what} matches {pattern!r}{hint} ({what}s: {listing}{more})"
