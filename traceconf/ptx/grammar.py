"""Loads ``ptx.lark`` and builds the one LALR parser every parse path uses.

The grammar lives in ``grammars/ptx.lark`` in the source tree and in
``traceconf/grammars/ptx.lark`` inside an installed wheel (see
``[tool.hatch.build.targets.wheel.force-include]`` in pyproject.toml).
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from pathlib import Path

from lark import Lark

from traceconf.ptx.transform import PtxTransformer

_PACKAGE = Path(__file__).resolve().parents[1]
GRAMMAR_CANDIDATES = (
    _PACKAGE / "grammars" / "ptx.lark",           # installed wheel
    _PACKAGE.parent / "grammars" / "ptx.lark",    # source tree / editable install
)

#: Start symbols: a whole file, the statements of a function body, operands.
START_SYMBOLS = ("start", "body_items", "operand", "operands")


def grammar_path() -> Path:
    for path in GRAMMAR_CANDIDATES:
        if path.is_file():
            return path
    raise FileNotFoundError("ptx.lark not found in " + ", ".join(str(p) for p in GRAMMAR_CANDIDATES))


class PtxParser:
    """The LALR parser with the transformer inlined; one parse at a time (the
    transformer slices operand texts out of the source it is given)."""

    def __init__(self, grammar: str, transformer: PtxTransformer | None):
        self.transformer = transformer
        self.lark = Lark(grammar, parser="lalr", lexer="contextual", start=list(START_SYMBOLS),
                         transformer=transformer, maybe_placeholders=True)
        self._lock = threading.Lock()

    def parse(self, text: str, start: str = "start"):
        with self._lock:
            if self.transformer is not None:
                self.transformer.source = text
            return self.lark.parse(text, start=start)

    def terminal_regex(self, name: str) -> str:
        """The regular expression of a grammar terminal (the statement splitter reuses them)."""
        return self.lark.get_terminal(name).pattern.to_regexp()


@lru_cache(maxsize=None)
def ptx_parser() -> PtxParser:
    """Parser producing :mod:`traceconf.ptx.records` directly (no tree)."""
    return PtxParser(grammar_path().read_text(), PtxTransformer())


@lru_cache(maxsize=None)
def tree_parser() -> PtxParser:
    """Plain Lark tree-building parser of the same grammar (benchmarks and debugging)."""
    return PtxParser(grammar_path().read_text(), None)


@lru_cache(maxsize=None)
def terminal(name: str) -> re.Pattern:
    return re.compile(ptx_parser().terminal_regex(name))
