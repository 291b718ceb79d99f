"""Vectorized tokenizing and number parsing over a block of trace text.

Trace readers see a block of whole lines as one ``numpy.uint8`` array.  Instead
of splitting lines in Python, they locate every token (a run of non-blank
bytes) and every line once, with array operations, and then parse the few
tokens they need (PCs, masks, addresses) for all lines of the block at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Value of each byte as a hexadecimal digit, 255 when it is not one.
_HEX_DIGIT = np.full(256, 255, dtype=np.uint8)
_HEX_DIGIT[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_HEX_DIGIT[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_HEX_DIGIT[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)

_NEWLINE = ord("\n")
_BLANK = ord(" ")  # every byte <= space separates tokens (space, tab, CR, LF)
_WINDOW = 32  # zero bytes before and after the text in Tokens._words, so that bytes_at may read past its ends


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

    @cached_property
    def _words(self) -> np.ndarray:
        """Element ``p + _WINDOW`` is ``buf[p:p + 8]`` as a little-endian uint64 (zeros outside ``buf``): a
        zero-copy, unaligned view, so that 8 bytes at any positions are gathered in one indexing operation."""
        padded = np.zeros(len(self.buf) + 3 * _WINDOW, dtype=np.uint8)
        padded[_WINDOW:_WINDOW + len(self.buf)] = self.buf
        return np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))

    def bytes_at(self, position: np.ndarray, width: int) -> np.ndarray:
        """``buf[p:p + width]`` for every ``p`` in ``position`` (``p >= -_WINDOW``), zeros outside ``buf``: an
        (n, width) array gathered 8 bytes at a time, not byte by byte."""
        position = np.minimum(position, len(self.buf)) + _WINDOW
        words = -(-width // 8)
        if words == 1:
            out = self._words[position]
        else:
            out = np.empty((len(position), words), dtype="<u8")
            for word in range(words):
                out[:, word] = self._words[np.minimum(position + 8 * word, len(self.buf) + _WINDOW)]
        return out.view(np.uint8).reshape(len(position), 8 * words)[:, :width]


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
    out = tokens.bytes_at(tokens.start[index], width)
    out *= np.arange(width) < (tokens.end[index] - tokens.start[index])[:, None]
    return out


def token_strings(tokens: Tokens, index: np.ndarray, width: int = 32) -> np.ndarray:
    """Tokens in ``index`` as a fixed-width bytes array (``S<width>``), truncated to ``width``."""
    return np.ascontiguousarray(token_bytes(tokens, index, width)).view(f"S{width}").reshape(-1)


def parse_hex(tokens: Tokens, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hexadecimal tokens (with or without ``0x``) as int64, and a mask of tokens that are not valid.

    Values above 2**63 wrap to negative int64 like the unsigned values they are.
    """
    start, end = tokens.start[index], tokens.end[index]
    head = tokens.bytes_at(start, 2)
    prefixed = (end - start > 2) & (head[:, 0] == ord("0")) & ((head[:, 1] | 0x20) == ord("x"))
    start = start + 2 * prefixed
    length = end - start
    value, bad = _hex_digits(tokens, np.maximum(start, end - 16), end)
    return value.view(np.int64), bad | (length < 1) | (length > 16)


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


def _repeat(byte: int) -> np.uint64:
    return np.uint64(int.from_bytes(bytes([byte]) * 8, "little"))


_ASCII_ZEROS, _LOW_NIBBLES, _HIGH_BITS, _LOWER_CASE = _repeat(ord("0")), _repeat(0x0F), _repeat(0x80), _repeat(0x20)
#: _PRESENT[k]: the last k of 8 bytes, i.e. the high bytes of a little-endian load
_PRESENT = np.array([((1 << 64) - (1 << (64 - 8 * k))) if k else 0 for k in range(9)], dtype=np.uint64)


def _in_range(x: np.ndarray, low: int, high: int) -> np.ndarray:
    """Per byte of ``x`` (bytes below 0x80): 0x80 where the byte lies in ``[low, high]``, else 0."""
    return ((x | _HIGH_BITS) - _repeat(low)) & (_repeat(high | 0x80) - x) & _HIGH_BITS


def _combine(x: np.ndarray) -> np.ndarray:
    """Eight nibbles, one per byte of a little-endian load (first digit in the lowest byte), as a number."""
    for bits, mask in ((8, 0x00FF00FF00FF00FF), (16, 0x0000FFFF0000FFFF), (32, 0x00000000FFFFFFFF)):
        mask = np.uint64(mask)
        x = ((x & mask) << np.uint64(bits // 2)) | ((x >> np.uint64(bits)) & mask)
    return x


def _hex_digits(tokens: Tokens, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The hexadecimal digits in ``[start, end)`` of each token as a uint64, and whether any is no digit.

    Eight characters at a time as one uint64 (SIMD within a register): right-aligned, with absent leading
    characters read as "0", they are checked and combined by a few integer operations per token, none
    per byte or digit.
    """
    length = end - start
    value = np.zeros(len(start), dtype=np.uint64)
    bad = np.zeros(len(start), dtype=bool)
    for chunk in range(max(1, -(-int(length.max(initial=0)) // 8)) - 1, -1, -1):  # most significant first
        x = tokens.bytes_at(end - 8 * (chunk + 1), 8).view(np.uint64).reshape(-1)
        present = _PRESENT[np.clip(length - 8 * chunk, 0, 8)]
        x = (x & present) | (_ASCII_ZEROS & ~present)
        bad |= (x & _HIGH_BITS) != 0
        x = x | _LOWER_CASE  # A-F become a-f; no other byte above 0x20 becomes a digit or a-f
        letter = _in_range(x, ord("a"), ord("f"))
        bad |= (_in_range(x, ord("0"), ord("9")) | letter) != _HIGH_BITS
        value = (value << np.uint64(32)) | _combine((x & _LOW_NIBBLES) + (letter >> np.uint64(7)) * np.uint64(9))
    return value, bad


def line_array(block, line_start: np.ndarray) -> pa.Array:
    """A zero-copy Arrow view of the lines of ``block``: line ``i`` runs from ``line_start[i]`` to the next
    line's start (its newline included), the last one to the end of ``block``."""
    offsets = np.empty(len(line_start) + 1, dtype=np.int64)
    offsets[:-1] = line_start
    offsets[-1] = len(block)
    return pa.Array.from_buffers(pa.large_binary(), len(line_start), [None, pa.py_buffer(offsets), pa.py_buffer(block)])


def distinct_lines(lines: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The distinct texts among ``lines`` (in order of first appearance) and, for every line, the index of
    its text: hashing a line costs far less than a regex call (about 100 ns each, whatever the line)."""
    encoded = pc.dictionary_encode(lines)
    return encoded.dictionary, encoded.indices.to_numpy()


def line_lengths(lines: pa.Array) -> np.ndarray:
    """The length in bytes of each line (newline included, as :func:`line_array` makes them)."""
    return pc.binary_length(lines).to_numpy()


def lines_matching(lines: pa.Array, pattern: str) -> np.ndarray:
    """Whether each line matches the RE2 ``pattern`` (anchor it with ``^``): all lines in one C++ call."""
    return pc.match_substring_regex(lines, pattern).to_numpy(zero_copy_only=False)


def concat_lines(lines: pa.Array, keep: np.ndarray) -> pa.Buffer:
    """The text of the lines where ``keep`` is true, concatenated (a block of whole lines)."""
    kept = pc.filter(lines, pa.array(keep))
    offsets = np.frombuffer(kept.buffers()[1], dtype=np.int64, count=len(kept) + 1, offset=8 * kept.offset)
    return kept.buffers()[2][int(offsets[0]):int(offsets[-1])] if len(kept) else pa.py_buffer(b"")


_MIX = np.uint64(0x9E3779B97F4A7C15)


def group_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``keys`` (an (n, m) uint64 array) grouped by equality: the first row of each group, and the
    group of every row.  One integer sort of a hash of each row, checked exactly: far cheaper than
    ``np.unique`` over byte strings, which it falls back to only if two different rows hash alike."""
    hashed = keys[:, 0].copy()
    for column in keys.T[1:]:
        hashed = hashed * _MIX + column  # wraps modulo 2**64
    _, first, group = np.unique(hashed, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    if not np.array_equal(np.take(keys[first], group, axis=0), keys):
        _, first, group = np.unique(np.ascontiguousarray(keys).view(f"V{8 * keys.shape[1]}").reshape(-1),
                                    return_index=True, return_inverse=True)
    return first, group.reshape(-1)
