"""Vectorized tokenizing and number parsing over a block of trace text.

Trace readers see a block of whole lines as one ``numpy.uint8`` array.  Instead
of splitting lines in Python, they locate every token (a run of non-blank
bytes) and every line once, with array operations, and then parse the few
tokens they need (PCs, masks, addresses) for all lines of the block at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Value of each byte as a hexadecimal digit, 255 when it is not one.
_HEX_DIGIT = np.full(256, 255, dtype=np.uint8)
_HEX_DIGIT[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_HEX_DIGIT[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_HEX_DIGIT[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)

_NEWLINE = ord("\n")
_BLANK = ord(" ")  # every byte <= space separates tokens (space, tab, CR, LF)


@dataclass
class Tokens:
    """Token and line positions of one block of text.

    ``start[t]``/``end[t]`` delimit token ``t``; ``line_start[i]``/``line_end[i]``
    delimit line ``i`` (``line_end`` is the position of its newline);
    ``first[i]`` is the index of line ``i``'s first token and ``count[i]`` how
    many tokens it has.
    """

    buf: np.ndarray
    start: np.ndarray
    end: np.ndarray
    line_start: np.ndarray
    line_end: np.ndarray
    first: np.ndarray
    count: np.ndarray

    def line_text(self, line: int) -> str:
        return bytes(self.buf[self.line_start[line]:self.line_end[line]]).decode("utf-8", "replace").rstrip("\r")

    def text(self, token: int) -> str:
        return bytes(self.buf[self.start[token]:self.end[token]]).decode("utf-8", "replace")

    def column(self, token: int, line: int) -> int:
        """1-based column of a token inside its line."""
        return int(self.start[token] - self.line_start[line]) + 1


def tokenize(block: bytes) -> Tokens:
    """Tokens and lines of ``block``, which must end with a newline."""
    buf = np.frombuffer(block, dtype=np.uint8)
    solid = np.empty(len(buf) + 2, dtype=np.int8)
    solid[0] = solid[-1] = 0
    np.greater(buf, _BLANK, out=solid[1:-1].view(bool))
    edges = np.flatnonzero(np.diff(solid))
    start, end = edges[0::2], edges[1::2]
    line_end = np.flatnonzero(buf == _NEWLINE)
    line_start = np.empty_like(line_end)
    line_start[:1] = 0
    line_start[1:] = line_end[:-1] + 1
    first = np.searchsorted(start, line_start)
    count = np.searchsorted(start, line_end) - first
    return Tokens(buf, start, end, line_start, line_end, first, count)


def token_bytes(tokens: Tokens, index: np.ndarray, width: int) -> np.ndarray:
    """The first ``width`` bytes of each token in ``index``, zero-padded: an (n, width) array."""
    start = tokens.start[index]
    pos = start[:, None] + np.arange(width)
    inside = pos < tokens.end[index][:, None]
    out = tokens.buf[np.minimum(pos, len(tokens.buf) - 1)]
    out[~inside] = 0
    return out


def token_strings(tokens: Tokens, index: np.ndarray, width: int = 32) -> np.ndarray:
    """Tokens in ``index`` as a fixed-width bytes array (``S<width>``), truncated to ``width``."""
    return np.ascontiguousarray(token_bytes(tokens, index, width)).view(f"S{width}").reshape(-1)


def parse_hex(tokens: Tokens, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hexadecimal tokens (with or without ``0x``) as int64, and a mask of tokens that are not valid.

    Values above 2**63 wrap to negative int64 like the unsigned values they are.
    """
    buf = tokens.buf
    start, end = tokens.start[index], tokens.end[index]
    prefixed = (end - start > 2) & (buf[start] == ord("0")) & ((buf[np.minimum(start + 1, len(buf) - 1)] | 0x20) == ord("x"))
    start = start + 2 * prefixed
    length = end - start
    bad = (length < 1) | (length > 16)
    value = np.zeros(len(index), dtype=np.uint64)
    width = int(length.max(initial=0))
    for digit in range(min(width, 16), 0, -1):  # most significant digit first
        pos = end - digit
        present = pos >= start
        nibble = _HEX_DIGIT[buf[np.where(present, pos, 0)]]
        bad |= present & (nibble == 255)
        value = np.where(present, (value << np.uint64(4)) | nibble.astype(np.uint64), value)
    return value.view(np.int64), bad


def parse_int(tokens: Tokens, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signed decimal tokens as int64, and a mask of tokens that are not valid decimals."""
    buf = tokens.buf
    start, end = tokens.start[index], tokens.end[index]
    negative = buf[start] == ord("-")
    start = start + (negative | (buf[start] == ord("+")))
    length = end - start
    bad = (length < 1) | (length > 18)
    value = np.zeros(len(index), dtype=np.int64)
    for digit in range(min(int(length.max(initial=0)), 19), 0, -1):
        pos = end - digit
        present = pos >= start
        number = buf[np.where(present, pos, 0)].astype(np.int64) - ord("0")
        bad |= present & ((number < 0) | (number > 9))
        value = np.where(present, value * 10 + number, value)
    return np.where(negative, -value, value), bad


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + c)`` for every (s, c) pair, without a Python loop."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(total)
