"""Accel-Sim 2.0 ``.tracez``: one kernel trace as per-warp zstd sub-chunks, read page by page.

The Hopper line of Accel-Sim (accel-sim-framework PR #553) writes ``kernel-N.tracez`` instead of
``.traceg``.  The layout below is read from its sources: the format header
``util/tracer_nvbit/tracer_tool/tracez_format.h``, the writer ``write_tracez`` in
``traces-processing/post-traces-processing.cpp`` and the simulator's reader
``gpu-simulator/trace-parser/warp_trace_stream.h``.  Integers are little-endian (the writer
``fwrite``s them on x86)::

    kernel header text: the '-key = value' lines (and '#...' / empty lines), each ending '\\n', then '\\0'
    u32 dict_size, u32 subchunk_insts
    dict_size bytes: a zstd dictionary (ZDICT-trained; 0 bytes when training failed)
    per warp of each CTA, in index order:
        u32 inst_count, u32 num_subchunks
        per sub-chunk: u32 compressed size, then one zstd frame (content size in its header, dictionary
        if there is one) holding that many instruction lines joined by '\\n' (no trailing newline)
    index (at index_offset): u32 num_tbs, then per CTA
        11 x u32: tb x, y, z, cluster id x, y, z, cluster cta x, y, z, cluster rank, warp_count
        per warp: u32 inst_count, u32 num_subchunks, u64 file_offset (of its u32 inst_count),
                  num_subchunks x u32 instruction lines per sub-chunk
    u64 index_offset (the last 8 bytes)

Warp ``j`` of a CTA's index record is warp ``j`` inside the CTA (the simulator hands record ``j`` to
the CTA's ``j``-th warp slot).  The instruction lines are ``.traceg`` body lines (the post-processor
strips the CTA, warp and cluster prefix of the raw trace), so they go through the same parser.

Reading stays bounded: the index is parsed record by record as the CTAs are reached, and one sub-chunk
(2048 instruction lines by default) is decompressed at a time.  What the parser sees is the text that
``post-traces-processing --text`` writes for the same trace (``#BEGIN_TB``, ``thread block``,
``cluster ...``, ``warp = j``, ``insts = n`` and the lines), in blocks of whole lines, so its line
numbers — the ones in error messages — are the line numbers of that ``.traceg``.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterator

from traceconf.errors import InputError
from traceconf.traces import source
from traceconf.traces.source import BLOCK_BYTES, Progress

SUFFIX = ".tracez"
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_TB = struct.Struct("<11I")
_WARP = struct.Struct("<IIQ")
#: A kernel header is a few hundred bytes; a NUL this far in means the file is no .tracez.
_HEADER_LIMIT = 1 << 20
#: Most a sub-chunk may expand to.  The writer's 2,048 lines take a few MiB; zstd expands up to ~32,000x, so a
#: hostile file of a few KiB could otherwise claim (and have decompress() allocate) gigabytes at once.
MAX_SUBCHUNK_BYTES = 256 << 20


def is_tracez(path: str | Path) -> bool:
    """Whether ``path`` is a .tracez: '-key = value' header text ending in a NUL byte.

    Decided by content, not by the name.  A text trace never holds a NUL, so a damaged .tracez (bad
    footer, truncated) is still recognised, and then reported as corrupt by :class:`TracezFile`.
    """
    try:
        with open(path, "rb") as raw:
            start = raw.read(_HEADER_LIMIT)
    except OSError:
        return False
    end = start.find(b"\0")
    return end > 0 and start[:end].lstrip().startswith(b"-")


class TracezFile:
    """An open .tracez: its header text, dictionary, and the equivalent .traceg body as blocks."""

    def __init__(self, path: str | Path, progress: Progress | None = None, progress_base: int = 0,
                 progress_total: int | None = None, block_bytes: int | None = None):
        import zstandard

        self.path = str(path)
        try:
            self._raw = open(path, "rb")
            # the index is read sequentially beside the data it points to: its own handle keeps its buffer
            self._index = open(path, "rb")
        except OSError as error:
            raise InputError(f"cannot open: {error.strerror}", self.path) from None
        self.size = self._raw.seek(0, 2)
        self._progress = progress
        self._base = progress_base
        self._total = progress_total if progress_total is not None else self.size
        self._block_bytes = block_bytes or BLOCK_BYTES
        self._raw.seek(0)
        start = self._raw.read(_HEADER_LIMIT)
        end = start.find(b"\0")
        if end < 0:
            self._corrupt("no NUL after the kernel header text", 0)
        self.header_text = start[:end].decode("utf-8", "replace")
        dict_size, self.subchunk_insts = self._unpack("<II", end + 1, "compression header")
        self._data_start = end + 1 + 8 + dict_size
        if self._data_start > self.size - 8:
            self._corrupt(f"dictionary of {dict_size} bytes runs past the end of the file", end + 1)
        self._raw.seek(end + 1 + 8)
        dictionary = self._raw.read(dict_size)
        try:
            self._zstd = zstandard.ZstdDecompressor(
                dict_data=zstandard.ZstdCompressionDict(dictionary) if dict_size else None)
        except zstandard.ZstdError as error:
            self._corrupt(f"unusable zstd dictionary: {error}", end + 1 + 8)
        self._zstd_error = zstandard.ZstdError
        (self.index_offset,) = self._unpack("<Q", self.size - 8, "index offset")
        if not self._data_start <= self.index_offset <= self.size - 8 - 4:
            self._corrupt(f"index offset {self.index_offset} outside the file's data ({self.size} bytes)",
                          self.size - 8)

    # ------------------------------------------------------------------ plumbing
    def close(self) -> None:
        self._raw.close()
        self._index.close()

    def __enter__(self) -> "TracezFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _corrupt(self, message: str, offset: int):
        raise InputError(f"corrupt .tracez at byte {offset}: {message}", self.path)

    def _read(self, offset: int, size: int, what: str, handle=None) -> bytes:
        handle = handle or self._raw
        if handle.tell() != offset:
            handle.seek(offset)
        data = handle.read(size)
        if len(data) != size:
            self._corrupt(f"{what}: file ends {size - len(data)} byte(s) short", offset)
        return data

    def _unpack(self, layout: str, offset: int, what: str) -> tuple:
        return struct.unpack(layout, self._read(offset, struct.calcsize(layout), what))

    # ------------------------------------------------------------------ index
    def ctas(self) -> Iterator[dict]:
        """The index records in file order, parsed one at a time: ``tb``, ``cluster_id``, ``cluster_cta``,
        ``cluster_rank`` and ``warps`` = [(inst_count, file_offset, [lines per sub-chunk])]."""
        offset = self.index_offset
        (count,) = struct.unpack("<I", self._read(offset, 4, "index", self._index))
        offset += 4
        for _ in range(count):
            values = _TB.unpack(self._read(offset, _TB.size, "index record", self._index))
            offset += _TB.size
            warps = []
            for _ in range(values[10]):
                insts, subchunks, data = _WARP.unpack(self._read(offset, _WARP.size, "warp index record",
                                                                 self._index))
                offset += _WARP.size
                if offset + 4 * subchunks > self.size - 8:
                    self._corrupt(f"warp index record claims {subchunks} sub-chunks", offset - _WARP.size)
                counts = struct.unpack(f"<{subchunks}I", self._read(offset, 4 * subchunks, "sub-chunk counts",
                                                                    self._index))
                offset += 4 * subchunks
                if sum(counts) != insts:
                    self._corrupt(f"warp index record: sub-chunks hold {sum(counts)} instructions, "
                                  f"inst_count says {insts}", offset - 4 * subchunks - _WARP.size)
                if not self._data_start <= data <= self.index_offset - 8:
                    self._corrupt(f"warp data offset {data} outside the data region", offset - 4 * subchunks - 8)
                warps.append((insts, data, counts))
            yield {"tb": values[0:3], "cluster_id": values[3:6], "cluster_cta": values[6:9],
                   "cluster_rank": values[9], "warps": warps}
        if offset != self.size - 8:
            self._corrupt(f"index ends at byte {offset}, {self.size - 8 - offset} byte(s) before the footer", offset)

    def subchunks(self, insts: int, offset: int, counts: tuple) -> Iterator[bytes]:
        """The decompressed text of one warp in pieces of whole lines, each ending with a newline and none much
        longer than the block size: a sub-chunk (up to :data:`MAX_SUBCHUNK_BYTES`) is never held whole."""
        stored = self._unpack("<II", offset, "warp header")
        if stored != (insts, len(counts)):
            self._corrupt(f"warp header says {stored[0]} instructions in {stored[1]} sub-chunks, the index "
                          f"{insts} in {len(counts)}", offset)
        offset += 8
        for number, expected in enumerate(counts):
            (size,) = self._unpack("<I", offset, "sub-chunk size")
            if offset + 4 + size > self.index_offset:
                self._corrupt(f"sub-chunk of {size} bytes runs into the index", offset)
            frame = self._read(offset + 4, size, "sub-chunk")
            lines = 0
            try:
                for piece in self._decompress(frame, number, offset):
                    lines += piece.count(b"\n")
                    if lines > expected:
                        break
                    yield piece
            except self._zstd_error as error:
                self._corrupt(f"sub-chunk {number} does not decompress: {error}", offset)
            if lines != expected:
                self._corrupt(f"sub-chunk {number} holds {'more than ' if lines > expected else ''}{lines} "
                              f"instruction line(s), the index says {expected}", offset)
            offset += 4 + size
            if self._progress is not None:
                self._progress(self._base + offset, self._total)

    def _decompress(self, frame: bytes, number: int, offset: int) -> Iterator[bytes]:
        """One sub-chunk's lines, newline-terminated, in pieces of about the block size, streamed (at most 1 MiB
        of decompressed text at a time); never more than :data:`MAX_SUBCHUNK_BYTES` in all, refused before
        anything is read when the frame states a larger size, and no line longer than ``MAX_LINE_BYTES``."""
        import zstandard

        def too_large(size: str):
            self._corrupt(f"sub-chunk {number} expands to {size} bytes, past the limit of "
                          f"{MAX_SUBCHUNK_BYTES >> 20} MiB per sub-chunk", offset)

        claimed = zstandard.frame_content_size(frame)
        if claimed > MAX_SUBCHUNK_BYTES:
            too_large(f"{claimed:,}")
        pending, held, total = [], 0, 0
        with self._zstd.stream_reader(frame) as reader:
            while piece := reader.read(min(1 << 20, self._block_bytes)):
                total += len(piece)
                if total > MAX_SUBCHUNK_BYTES:
                    too_large("more than that many")
                pending.append(piece)
                held += len(piece)
                if held >= self._block_bytes:
                    text = b"".join(pending)
                    cut = text.rfind(b"\n") + 1
                    if cut == 0 and held > source.MAX_LINE_BYTES:
                        self._corrupt(f"sub-chunk {number} holds a line longer than "
                                      f"{source.MAX_LINE_BYTES >> 20} MiB", offset)
                    if cut:
                        yield text[:cut]
                    pending, held = [text[cut:]], len(text) - cut
        if total:       # the writer joins the lines with newlines: the last one has none
            yield b"".join(pending) + b"\n"

    # ------------------------------------------------------------------ the equivalent .traceg
    def header_lines(self) -> list[str]:
        return self.header_text.split("\n")[:-1] if self.header_text.endswith("\n") else \
            self.header_text.split("\n")

    def cta_sizes(self) -> list[int]:
        """Compressed bytes of each CTA record's data, in index order (to cut a kernel into shares)."""
        starts = [cta["warps"][0][1] if cta["warps"] else None for cta in self.ctas()]
        sizes, following = [], self.index_offset
        for start in reversed(starts):
            sizes.append(0 if start is None else following - start)
            following = following if start is None else start
        return sizes[::-1]

    @staticmethod
    def text_lines(cta: dict) -> int:
        """Lines of one CTA in the equivalent .traceg: 3 for '#BEGIN_TB', 4 for the thread block and cluster
        lines, 3 + its instructions per warp, 2 for '#END_TB' (see :meth:`blocks`)."""
        return 9 + sum(3 + insts for insts, _, _ in cta["warps"])

    def blocks(self, ctas: tuple[int, int] | None = None) -> Iterator[tuple[bytes, int]]:
        """The body as ``post-traces-processing --text`` writes it, in blocks of whole lines:
        (text ending with a newline, line number of its first line).  ``ctas=(first, end)``: only those CTA
        records (line numbers stay those of the whole file)."""
        line = len(self.header_lines())
        pending: list[bytes] = []
        size = 0
        first = line + 1
        for index, cta in enumerate(self.ctas()):
            if ctas is not None and not ctas[0] <= index < ctas[1]:
                if not pending:
                    first += self.text_lines(cta)
                if index >= ctas[1]:
                    break
                continue
            x, y, z = cta["tb"]
            parts = [b"\n#BEGIN_TB\n\n", f"thread block = {x},{y},{z}\n".encode(),
                     "cluster id = {},{},{}\ncluster cta = {},{},{}\ncluster rank = {}\n".format(
                         *cta["cluster_id"], *cta["cluster_cta"], cta["cluster_rank"]).encode()]
            for warp, (insts, offset, counts) in enumerate(cta["warps"]):
                parts.append(f"\nwarp = {warp}\ninsts = {insts}\n".encode())
                for text in self.subchunks(insts, offset, counts):
                    parts.append(text)
                    size += len(text)
                    if size >= self._block_bytes:
                        pending += parts
                        parts = []
                        block = b"".join(pending)
                        yield block, first
                        first += block.count(b"\n")
                        pending, size = [], 0
            parts.append(b"\n#END_TB\n")
            pending += parts
        if pending:
            yield b"".join(pending), first
