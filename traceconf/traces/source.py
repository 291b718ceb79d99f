"""Reading trace files as blocks of whole lines: plain, ``.xz`` or ``.gz``, with progress.

Memory stays flat however large the trace is: a reader holds one block (a few
MiB of text) at a time.  Compression is recognised by magic bytes, not by the
file name.  Progress is reported on bytes read from disk (compressed bytes for
compressed files), so it reaches the file size at the end.
"""

from __future__ import annotations

import gzip
import lzma
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from traceconf.errors import InputError

XZ_MAGIC = b"\xfd7zXZ\x00"
GZIP_MAGIC = b"\x1f\x8b"

#: progress(bytes_done, bytes_total)
Progress = Callable[[int, int], None]

BLOCK_BYTES = 4 << 20
#: No trace line is anywhere near this long (a 32-lane Accel-Sim line is under 1 KiB): a file that goes on this
#: long without a newline (a decompression bomb of one byte, a binary file) is refused, not held in memory.
MAX_LINE_BYTES = 64 << 20


def open_bytes(path: str | Path):
    """A binary file object over the decompressed content of ``path``, and the raw file under it."""
    try:
        raw = open(path, "rb")
    except OSError as error:
        raise InputError(f"cannot open: {error.strerror}", str(path)) from None
    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(XZ_MAGIC):
        return lzma.LZMAFile(raw), raw
    if magic.startswith(GZIP_MAGIC):
        return gzip.GzipFile(fileobj=raw), raw
    return raw, raw


def head(path: str | Path, size: int = 65536) -> bytes:
    """The first ``size`` decompressed bytes of a file."""
    stream, raw = open_bytes(path)
    try:
        return stream.read(size)
    except (lzma.LZMAError, EOFError, OSError) as error:
        raise InputError(f"cannot decompress: {error}", str(path)) from None
    finally:
        stream.close()
        raw.close()


class LineBlocks:
    """A file read as blocks of whole lines, keeping count of line numbers.

    ``readline()`` serves headers line by line; ``blocks()`` then yields the
    rest as ``(text, first_line_number)`` pairs, each text ending with a newline.
    """

    def __init__(self, path: str | Path, progress: Progress | None = None,
                 progress_base: int = 0, progress_total: int | None = None,
                 block_bytes: int | None = None):
        self.path = str(path)
        self._stream, self._raw = open_bytes(path)
        self._progress = progress
        self._base = progress_base
        self._total = progress_total if progress_total is not None else Path(path).stat().st_size
        self._block_bytes = block_bytes or BLOCK_BYTES
        self._pending = b""
        self.line = 0  # number of lines handed out so far

    def close(self) -> None:
        self._stream.close()
        self._raw.close()

    def __enter__(self) -> "LineBlocks":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read(self, size: int) -> bytes:
        try:
            data = self._stream.read(size)
        except (lzma.LZMAError, EOFError, OSError) as error:
            where = f" after line {self.line:,}" if self.line else ""
            raise InputError(f"cannot decompress{where}: {error}", self.path, self.line or None) from None
        if self._progress is not None:
            self._progress(self._base + self._raw.tell(), self._total)
        return data

    def readline(self) -> bytes | None:
        """The next line without its newline, or None at the end of the file."""
        while b"\n" not in self._pending:
            data = self._read(65536)
            if not data:
                if not self._pending:
                    return None
                self._pending += b"\n"
                break
            self._pending += data
            self._check_line(self._pending)
        line, self._pending = self._pending.split(b"\n", 1)
        self.line += 1
        return line

    def _check_line(self, pending: bytes) -> None:
        if len(pending) > MAX_LINE_BYTES:
            raise InputError(f"line {self.line + 1:,} runs past {MAX_LINE_BYTES >> 20} MiB without a newline: "
                             "not a trace (binary data, or a decompression bomb)", self.path, self.line + 1)

    def unread(self, line: bytes) -> None:
        """Push a line obtained from ``readline`` back in front of the stream."""
        self._pending = line + b"\n" + self._pending
        self.line -= 1

    def blocks(self) -> Iterator[tuple[bytes, int]]:
        """The rest of the file as blocks of whole lines: (text ending with a newline, number of its first line)."""
        while True:
            data = self._pending
            self._pending = b""
            while True:
                more = self._read(self._block_bytes)
                if not more:
                    if data and not data.endswith(b"\n"):
                        data += b"\n"
                    break
                data += more
                cut = data.rfind(b"\n")
                if cut >= 0:
                    data, self._pending = data[:cut + 1], data[cut + 1:]
                    break
                self._check_line(data)
            if not data:
                return
            first = self.line + 1
            self.line += int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")))  # 1/4 of bytes.count
            yield data, first
