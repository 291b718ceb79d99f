"""Loads ``ptx.lark`` and builds the one LALR parser both the fast path and the reference use.

The grammar lives in ``grammars/ptx.lark`` in the source tree and in
``traceconf/grammars/ptx.lark`` inside an installed wheel (see
``[tool.hatch.build.targets.wheel.force-include]`` in pyproject.toml).
"""

from __future__ import annotations

import hashlib
import json
import threading
from functools import cached_property, lru_cache
from pathlib import Path

import lark
from lark import Lark

from traceconf.ptx.transform import PtxTransformer
from traceconf.sass.toolchain import cache_dir, store_cached

_PACKAGE = Path(__file__).resolve().parents[1]
GRAMMAR_CANDIDATES = (
    _PACKAGE / "grammars" / "ptx.lark",           # installed wheel
    _PACKAGE.parent / "grammars" / "ptx.lark",    # source tree / editable install
)

#: Start symbols: a whole file, the statements of a function body, operands.
START_SYMBOLS = ("start", "body_items", "operand", "operands")

#: What the grammar ignores between tokens (its ``%ignore`` pattern); Python's ``\s`` and
#: ``str.strip()`` also take U+00A0, U+2028, ``\v``... which PTX does not.
GRAMMAR_BLANKS = " \t\f\r\n"


def grammar_path() -> Path:
    for path in GRAMMAR_CANDIDATES:
        if path.is_file():
            return path
    raise FileNotFoundError("ptx.lark not found in " + ", ".join(str(p) for p in GRAMMAR_CANDIDATES))


class PtxParser:
    """The LALR parser with the records transformer inlined (no tree is built), and the regexes of the grammar's
    terminals.

    The transformer slices instruction and operand texts out of the text being
    parsed, so one parse runs at a time (the lock); nothing is kept between
    parses.  The parser is built on the first parse: a file the fast path reads whole needs only the terminals'
    regexes, which the cache folder keeps (:attr:`terminals`).
    """

    def __init__(self, grammar: str):
        self.grammar = grammar
        self.transformer = PtxTransformer()
        self._lock = threading.Lock()

    @cached_property
    def lark(self) -> Lark:
        # cache: Lark keeps the grammar analysis (the LALR tables, ~0.1 s) in a file of the temporary folder keyed
        # by the grammar, the options and Lark's version, so only the first run of a grammar builds them (loading
        # them still takes ~0.02 CPU-s)
        return Lark(self.grammar, parser="lalr", lexer="contextual", start=list(START_SYMBOLS),
                    transformer=self.transformer, maybe_placeholders=True, cache=True)

    @cached_property
    def terminals(self) -> dict[str, str]:
        """The regular expression of every terminal of the grammar, by name: kept in the cache folder per grammar
        text and Lark version (``grammar/HASH.json``), else read from the parser (built for it) and stored."""
        key = hashlib.sha256(f"{lark.__version__}\0{self.grammar}".encode()).hexdigest()
        path = cache_dir() / "grammar" / f"{key}.json"
        try:
            return json.loads(path.read_bytes())
        except (OSError, ValueError):
            terminals = {terminal.name: terminal.pattern.to_regexp() for terminal in self.lark.terminals}
            store_cached(path, json.dumps(terminals).encode())
            return terminals

    def parse(self, text: str, start: str = "start"):
        with self._lock:
            self.transformer.source = text
            try:
                return self.lark.parse(text, start=start)
            finally:
                self.transformer.source = ""    # keep no text (maybe a whole file) between parses

    def terminal_regex(self, name: str) -> str:
        """The regular expression of a grammar terminal (the fast path builds its regexes from them)."""
        return self.terminals[name]


@lru_cache(maxsize=None)
def ptx_parser() -> PtxParser:
    """The parser of ``ptx.lark`` (one per process: the LALR tables take a while)."""
    return PtxParser(grammar_path().read_text())
