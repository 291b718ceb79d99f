"""Accel-Sim NVBit traces: ``kernelslist.g`` + ``kernel-N.traceg[.xz]`` / ``.tracez``, or one kernel file.

A ``.traceg`` is a ``-key = value`` launch header, then ``#BEGIN_TB`` /
``thread block = x,y,z`` / ``warp = w`` / ``insts = n`` blocks, each followed
by one line per warp-level SASS instruction::

    [tb_x tb_y tb_z warp (version < 3)] [line_num (lineinfo)] PC mask dest_num dests...
        OPCODE src_num srcs... mem_width [mode addresses...] [immediates, Val|NoVal...]

Address modes: 0 = one hex address per active lane; 1 = ``base stride``
applied to the active lanes in order; 2 = ``base`` then one signed delta per
further active lane, each relative to the previous active lane.  Anything after
the address block (v4's optional immediate, v5's two, v6's register values) is
ignored.  See docs/traces.md for the versions and their evidence.

Parsing is vectorized per block of text (see :mod:`traceconf.traces.tokens`).
A trace repeats most of its lines (an ALU instruction is the same line in every
warp, a shared access often the same line in every CTA), so the block's lines
are hashed into their distinct texts and everything that depends on a line's
text alone is done once per distinct text.  One RE2 pass over those
(:func:`plain_line_pattern`) finds the well-formed lines whose opcode cannot
touch shared memory (ALU, global and local memory: most of a trace); those are
only counted.  The other texts are gathered and tokenized; of those, lines whose
opcode family can touch shared memory are decoded in full, all at once.  What
depends on a line's place (its warp and CTA, its line number, the count of
instruction lines per warp) is then worked out per line.  Line numbers, counts
and errors are those of the whole block.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.errors import InputError
from traceconf.traces import tracez
from traceconf.traces.kernel import (BLOCK_LIMITS, GRID_LIMITS, BadLines, InstructionsSeen, KernelStart, chunked,
                                     dims_problem, launch_number_problem)
from traceconf.traces.options import Problem, ReadOptions
from traceconf.sass.opcodes import ALWAYS, FAMILIES, shared_op
from traceconf.traces.source import LineBlocks
from traceconf.traces.source import head
from traceconf.traces.tokens import (_HEX_DIGIT, _NEWLINE, Tokens, concat_lines, distinct_lines, group_rows,
                                     line_array, line_lengths, lines_matching, parse_hex, parse_int, token_bytes,
                                     token_strings, tokenize)

WARP_SIZE = 32
#: NVBit: "shmem range is [shmem_base_addr, shmem_base_addr+16MB) and the base address is 16MB aligned".
SHARED_WINDOW = 1 << 24

_FAMILY_WIDTH = 8
_FAMILY_KEYS = np.array([f.encode() for f in FAMILIES], dtype=f"S{_FAMILY_WIDTH}").view(np.uint64)
#: Mode-1 lines with |base| and |stride| below these span base .. base + 31 * stride without int64 wrap-around,
#: so their shared-window test can be made on the two ends of the span (see TracegParser._decode).
_SAFE_BASE, _SAFE_STRIDE = 1 << 62, 1 << 40
_BYTE_BITS = np.arange(8, dtype=np.uint8)
#: For every byte of an active mask (8 lanes): which of its lanes are active, how many, and the rank of each
#: lane among the active lanes of the byte below it.
_BYTE_LANES = (np.arange(256, dtype=np.uint8)[:, None] >> _BYTE_BITS & 1).astype(bool)
_BYTE_POPULATION = _BYTE_LANES.sum(axis=1).astype(np.uint8)
_BYTE_RANK = (np.cumsum(_BYTE_LANES, axis=1) - _BYTE_LANES).astype(np.uint8)

_HEADER = re.compile(r"-\s*(?P<key>[^=]*?)\s*=\s*(?P<value>.*?)\s*$")
_DIM = re.compile(r"\(?\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)?")
_STRUCTURE = re.compile(
    rb"(?P<begin>#BEGIN_TB)|(?P<end>#END_TB)|thread block\s*=\s*(?P<tb>\d+\s*,\s*\d+\s*,\s*\d+)"
    rb"|warp\s*=\s*(?P<warp>\d+)|insts\s*=\s*(?P<insts>\d+)|(?P<cluster>cluster (id|cta|rank)\s*=.*)|(?P<comment>#.*)")

# Reasons a candidate line is malformed, in the order they are checked.
_REASONS = (
    None,
    "truncated instruction line: expected PC, mask, dest count and opcode",
    "dest count is not a small decimal number",
    "bad source-register count",
    "memory instruction without mem_width and address block",
    "bad mem_width (a shared-memory opcode needs mem_width > 0 and an address block)",
    "unknown address mode (expected 0, 1 or 2)",
    "too few addresses for the active mask",
    "bad hexadecimal PC",
    "bad hexadecimal active mask",
    "bad address",
    "bad address stride or delta",
    "shared-memory address outside the shared window",
    "bad thread-block/warp prefix",
    "instruction line outside a 'warp = N' block",
    "bad source line number (expected 0..2,147,483,647)",
)


_SEPARATOR = r"[\x00-\x20]"  # token separators, as in tokens.py (a line's newline ends its last token)
_SOLID = r"[^\x00-\x20]"


def _other_than(words: tuple[str, ...], prefix: str = "") -> str:
    """RE2 for the opcode families (runs of bytes that are no separator and no '.') that, after ``prefix``,
    spell none of ``words``: the complement of their trie, so that no look-ahead is needed."""
    follow = sorted({w[len(prefix)] for w in words if w.startswith(prefix) and len(w) > len(prefix)})
    family_byte = r"[^\x00-\x20.]"
    other = r"[^\x00-\x20." + "".join(follow) + "]" + family_byte + "*"
    branches = ([""] if prefix not in words else []) + [other]
    branches += [f"{c}(?:{_other_than(words, prefix + c)})" for c in follow]
    return "|".join(branches)


@lru_cache(maxsize=None)
def plain_line_pattern(prefix_tokens: int) -> str:
    """RE2 that a line matches only if parse_block would find it a well-formed instruction line whose opcode
    family cannot touch shared memory: such a line yields nothing and is only counted.

    It is deliberately narrow (dest count written as one digit 0-9, opcode family spelled exactly): a line
    it misses is parsed in full, so it only has to be sound, not complete.
    """
    token = f"{_SEPARATOR}+{_SOLID}+"
    dests = "|".join(f"{n}(?:{token}){{{n}}}" if n else "0" for n in range(10))
    # the opcode token: a family other than those (possibly empty when a '.' follows), then its modifiers
    opcode = f"(?:(?:{_other_than(FAMILIES)})\\.{_SOLID}*|(?:{_other_than(FAMILIES + ('',))}))"
    return (f"^{_SEPARATOR}*[0-9a-fA-F](?:[0-9a-fA-F]{_SOLID}*)?(?:{token}){{{prefix_tokens + 1}}}"
            f"{_SEPARATOR}+(?:{dests}){_SEPARATOR}+{opcode}(?:{_SEPARATOR}|$)")


def read_kernelslist(path: Path) -> list[tuple[int, str, Path]]:
    """(line, text, kernel file) for every kernel line of a kernelslist; Memcpy lines are skipped."""
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", str(path)) from None
    kernels = []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.strip()
        if not entry or entry.startswith("Memcpy"):
            continue
        if not entry.startswith("kernel") or ".trace" not in entry:
            raise InputError("expected a MemcpyHtoD line or a kernel-N.traceg file name", str(path), number,
                             1, line)
        kernels.append((number, line, path.parent / entry))
    return kernels


def events(path: Path, options: ReadOptions) -> Iterator:
    """Reader events (see :mod:`traceconf.traces.kernel`) for a kernelslist, its folder, or one .traceg."""
    if path.is_dir():
        path = path / "kernelslist.g"
    if is_kernel_file(path):
        yield from kernel_file_events(path, options, 0, None)
        return
    kernels = read_kernelslist(path)
    sizes = [f.stat().st_size if f.exists() else 0 for _, _, f in kernels]
    done = 0
    for (number, line, file), size in zip(kernels, sizes):
        if not file.exists():  # yielded, not raised: the launches before and after it are complete
            yield InputError(f"kernel trace {file.name} not found", str(path), number, 1, line)
            continue
        if not _inside(file, path.parent) and not _is_traceg(file):
            # a listing may point anywhere: outside its folder only trace files are read, and nothing of
            # another file is ever shown
            yield InputError(f"{file.name} is outside the kernelslist's folder and not an Accel-Sim trace: "
                             "not read", str(path), number, 1, line)
            continue
        yield from kernel_file_events(file, options, done, sum(sizes))
        done += size


def _inside(file: Path, folder: Path) -> bool:
    return file.resolve().is_relative_to(folder.resolve())


def _is_traceg(file: Path) -> bool:
    try:
        return is_kernel_file(file)
    except InputError:
        return False


def is_kernel_file(path: Path) -> bool:
    """Whether ``path`` is one kernel's trace (.traceg, .xz, .gz, .tracez), not a kernelslist."""
    return head(path, 4096).lstrip().startswith(b"-kernel name")


def kernel_header(path: Path) -> dict:
    """The ``-key = value`` launch header of one kernel trace file (``"kernel name"`` and the others,
    lower-case keys), read without its body."""
    if tracez.is_tracez(path):
        with tracez.TracezFile(path) as file:
            return header_entries(file.header_lines(), str(path))
    with LineBlocks(path) as blocks:
        return read_header(blocks)


def read_header(blocks: LineBlocks) -> dict:
    """The ``-key = value`` launch header, leaving the stream at the first body line."""
    header: dict[str, str] = {}
    while True:
        raw = blocks.readline()
        if raw is None:
            break
        line = raw.decode("utf-8", "replace").strip()
        if not line:
            continue
        match = _HEADER.fullmatch(line) if line.startswith("-") else None
        if match is None:
            if not line.startswith("#traces format"):
                blocks.unread(raw)
            break
        header[match["key"].lower()] = match["value"]
    if "kernel name" not in header:
        raise InputError("not an Accel-Sim trace: no '-kernel name = ...' header", blocks.path, 1)
    return header


def launch_info(header: dict, path: str) -> dict:
    def dim(key: str, limits: tuple[int, int, int]) -> tuple[int, int, int]:
        match = _DIM.fullmatch(header.get(key, "(1,1,1)"))
        if match is None:
            raise InputError(f"bad -{key} header: {header[key][:80]!r}", path)
        dims = tuple(int(v) for v in match.groups())
        problem = dims_problem(f"-{key}", dims, limits)
        if problem:
            raise InputError(problem, path)
        return dims

    def number(key: str, default=None):
        value = header.get(key)
        if value is None:
            return default
        try:
            number = int(value, 0)
        except ValueError:
            raise InputError(f"bad -{key} header: {value[:80]!r}", path) from None
        problem = launch_number_problem(f"-{key}", number)
        if problem:
            raise InputError(problem, path)
        return number

    grid, block = dim("grid dim", GRID_LIMITS), dim("block dim", BLOCK_LIMITS)
    return {
        "format": "accelsim",
        "file": path,
        "kernel_name": header["kernel name"],
        "kernel_id": number("kernel id"),
        "grid": grid,
        "block": block,
        "warps_per_cta": -(-block[0] * block[1] * block[2] // WARP_SIZE),
        "shmem_bytes": number("shmem", 0),
        "nregs": number("nregs"),
        "binary_version": number("binary version"),
        "cuda_stream_id": number("cuda stream id"),
        "shmem_base": number("shmem base_addr"),
        "local_mem_base": number("local mem base_addr"),
        "nvbit_version": header.get("nvbit version"),
        "trace_version": number("accelsim tracer version", 0),
        "lineinfo": bool(number("enable lineinfo", 0)),
        "header": dict(header),
    }


def kernel_file_events(path: Path, options: ReadOptions, progress_base: int = 0,
                       progress_total: int | None = None, ctas: tuple[int, int] | None = None) -> Iterator:
    """Reader events of one kernel trace file: ``.traceg`` (plain, ``.xz``, ``.gz``) or Accel-Sim 2.0 ``.tracez``
    (``ctas=(first, end)``: only those CTA records of its index)."""
    if tracez.is_tracez(path):
        return _tracez_events(path, options, progress_base, progress_total, ctas)
    if ctas is not None:
        raise InputError("a text .traceg cannot be read by CTA range (a .tracez can)", str(path))
    return _traceg_events(path, options, progress_base, progress_total)


def _tracez_events(path: Path, options: ReadOptions, progress_base: int, progress_total: int | None,
                   ctas: tuple[int, int] | None = None) -> Iterator:
    with tracez.TracezFile(path, options.progress, progress_base, progress_total) as file:
        launch = launch_info(header_entries(file.header_lines(), str(path)), str(path))
        yield KernelStart(launch["kernel_name"], launch)
        parser = TracegParser(launch, str(path), options)
        last = len(file.header_lines())
        for text, first_line in file.blocks(ctas):
            yield from parser.parse_block(text, first_line)
            last = first_line + text.count(b"\n") - 1
        yield from parser.finish(last + 1)


def header_entries(lines: list[str], path: str) -> dict:
    """The ``-key = value`` entries of a header given as lines ('#' comments and empty lines allowed)."""
    header: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _HEADER.fullmatch(line) if line.startswith("-") else None
        if match is None:
            raise InputError("expected a '-key = value' kernel header line", path, number, 1, raw)
        header[match["key"].lower()] = match["value"]
    if "kernel name" not in header:
        raise InputError("not an Accel-Sim trace: no '-kernel name = ...' header", path, 1)
    return header


def _traceg_events(path: Path, options: ReadOptions, progress_base: int, progress_total: int | None) -> Iterator:
    with LineBlocks(path, options.progress, progress_base, progress_total) as blocks:
        launch = launch_info(read_header(blocks), str(path))
        yield KernelStart(launch["kernel_name"], launch)
        parser = TracegParser(launch, str(path), options)
        for text, first_line in blocks.blocks():
            yield from parser.parse_block(text, first_line)
        yield from parser.finish(blocks.line + 1)


class TracegParser:
    """Block-by-block parser of one ``.traceg`` body; carries the warp context between blocks."""

    def __init__(self, launch: dict, path: str, options: ReadOptions):
        self.path = path
        self.options = options
        self.grid = launch["grid"]
        self.prefix = (4 if launch["trace_version"] < 3 else 0) + (1 if launch["lineinfo"] else 0)
        self.has_tb_prefix = launch["trace_version"] < 3
        self.lineinfo = launch["lineinfo"]
        base = launch["shmem_base"] or 0
        self.shmem_base = base if base else None
        self.cta: int | None = None
        self.warp: int | None = None
        self.expected: tuple[int, int] | None = None  # (insts = N, its line) of the current warp
        self.seen = 0                                 # instruction lines seen in the current warp
        self.next_execution = 0
        self.pcs: set[int] = set()
        self.plain_line = plain_line_pattern(self.prefix)

    # ---------------------------------------------------------------- structure
    def _close_warp(self, line: int, problems: list[Problem]) -> None:
        if self.expected is not None and self.expected[0] != self.seen:
            declared, where = self.expected
            problems.append(Problem(line, f"warp {self.warp} declares insts = {declared} (line {where}) "
                                          f"but {self.seen} instruction lines follow"))
        self.expected = None
        self.seen = 0

    def _structure(self, texts: list[bytes], lines: np.ndarray, inst_before: np.ndarray, n_inst: int,
                   first_line: int, problems: list[Problem]) -> tuple[np.ndarray, np.ndarray]:
        """Walk the structure lines (``texts[k]`` is line ``lines[k]``); return the (cta, warp) in force after
        each of them (-1: none)."""
        cta = [-1 if self.cta is None else self.cta]
        warp = [-1 if self.warp is None else self.warp]
        previous = 0
        for text, line, before in zip(texts, lines.tolist(), inst_before.tolist()):
            self.seen += before - previous
            previous = before
            text = text.strip()
            number = first_line + line
            match = _STRUCTURE.fullmatch(text)
            kind = match.lastgroup if match is not None else None
            if match is None:
                problems.append(Problem(number, "unrecognised line in trace body", 1, text.decode("utf-8", "replace")))
            elif kind in ("begin", "end", "tb"):
                self._close_warp(number, problems)
                self.warp = None
                if kind == "tb":
                    x, y, z = (int(v) for v in match["tb"].split(b","))
                    problem = dims_problem("thread block index", (x + 1, y + 1, z + 1), self.grid)
                    if problem:   # the CTA index must lie inside the header's grid (and fit 64 bits)
                        problems.append(Problem(number, problem.replace("(CUDA's", "(the header's"), 1))
                        x = y = z = 0
                    gx, gy, _ = self.grid
                    self.cta = x + y * gx + z * gx * gy
            elif kind == "warp":
                self._close_warp(number, problems)
                self.warp = int(match["warp"])
                problem = launch_number_problem("warp", self.warp, 0, (1 << 31) - 1)
                if problem:
                    problems.append(Problem(number, problem, 1))
                    self.warp = 0
            elif kind == "insts":
                self.expected = (int(match["insts"]), number)
                problem = launch_number_problem("insts", self.expected[0])
                if problem:
                    problems.append(Problem(number, problem, 1))
                    self.expected = (0, number)
                self.seen = 0
            cta.append(-1 if self.cta is None else self.cta)
            warp.append(-1 if self.warp is None else self.warp)
        self.seen += n_inst - previous
        return np.array(cta, dtype=np.int64), np.array(warp, dtype=np.int64)

    def finish(self, line: int) -> Iterator:
        problems: list[Problem] = []
        self._close_warp(line, problems)
        yield from self._report(problems)

    def _report(self, problems: list[Problem]) -> Iterator:
        if not problems:
            return
        if not self.options.skip_bad:
            raise min(problems).error(self.path)
        yield BadLines(len(problems))

    # ---------------------------------------------------------------- lines
    def parse_block(self, block: bytes, first_line: int) -> Iterator:
        buf = np.frombuffer(block, dtype=np.uint8)
        line_end = np.flatnonzero(buf == _NEWLINE)
        line_start = np.empty_like(line_end)
        line_start[:1] = 0
        line_start[1:] = line_end[:-1] + 1
        # A trace repeats most of its lines (an ALU instruction is the same line in every warp; a shared
        # access, the same line in every CTA), so lines are screened, tokenized, classified and decoded once
        # per distinct text, then expanded to the lines of ``block`` that carry it.
        distinct, text_of_line = distinct_lines(line_array(block, line_start))
        # Most lines (ALU, global memory) provably yield nothing: they are only counted.  The rest is
        # tokenized; ``t``'s lines are the distinct texts of the kept lines (each ends with its newline, so
        # a text longer than one byte is a non-empty line).
        plain_text = lines_matching(distinct, self.plain_line)
        keep_text = ~plain_text & (line_lengths(distinct) > 1)
        is_plain = plain_text[text_of_line]
        plain = np.flatnonzero(is_plain)
        kept = np.flatnonzero(keep_text[text_of_line])  # line numbers in ``block``
        t = tokenize(concat_lines(distinct, keep_text))
        kept_text = (np.cumsum(keep_text) - 1)[text_of_line[kept]]  # line of ``t`` of each kept line
        lines = np.flatnonzero(t.count > 0)
        lead = token_bytes(t, t.first[lines], 2)
        digit = _HEX_DIGIT[lead] != 255
        is_inst = digit[:, 0] & (digit[:, 1] | (lead[:, 1] == 0))
        inst = lines[is_inst]  # distinct instruction texts: line numbers in ``t``
        kind_of_text = np.zeros(len(t.count), dtype=np.int8)  # 0: blank, 1: instruction, 2: structure
        kind_of_text[lines] = np.where(is_inst, 1, 2)
        kept_kind = kind_of_text[kept_text]
        inst_line, structure_line = kept[kept_kind == 1], kept[kept_kind == 2]  # line numbers in ``block``
        inst_of_text = np.zeros(len(t.count), dtype=np.int64)
        inst_of_text[inst] = np.arange(len(inst))
        inst_text = inst_of_text[kept_text[kept_kind == 1]]  # row of ``inst`` of each instruction line

        problems: list[Problem] = []
        every_inst = np.zeros(len(line_end), dtype=bool)
        every_inst[plain] = True
        every_inst[inst_line] = True
        every_inst = np.flatnonzero(every_inst)
        texts = [block[a:b] for a, b in zip(line_start[structure_line].tolist(), line_end[structure_line].tolist())]
        ctx_cta, ctx_warp = self._structure(texts, structure_line, np.searchsorted(every_inst, structure_line),
                                            len(every_inst), first_line, problems)
        # (cta, warp) in force at each instruction line: that after the last structure line above it
        context = np.searchsorted(structure_line, inst_line)

        reason = np.zeros(len(inst), dtype=np.int8)  # per distinct instruction text
        P = self.prefix
        first, count = t.first[inst], t.count[inst]
        last_token = len(t.start) - 1
        reason[count < P + 4] = 1
        dests, bad = parse_int(t, np.minimum(first + P + 2, last_token))
        _mark(reason, bad | (dests < 0) | (dests > 64), 2)
        dests = np.where(reason == 0, dests, 0)
        _mark(reason, count < P + 4 + dests, 1)
        opcode = np.minimum(first + P + 3 + dests, last_token)

        family = token_bytes(t, opcode, _FAMILY_WIDTH)
        family[np.cumsum(family == ord("."), axis=1) > 0] = 0
        family = np.ascontiguousarray(family).view(np.uint64).reshape(-1)
        candidate = np.zeros(len(family), dtype=bool)
        for key in _FAMILY_KEYS:  # ten integer comparisons beat a sort-based isin
            candidate |= family == key
        candidate &= reason == 0
        candidates = np.flatnonzero(candidate)  # distinct texts decoded in full
        decoded = self._decode(t, first[candidates], count[candidates], opcode[candidates])
        line_reason = reason[inst_text]  # per instruction line; reasons found first take precedence
        if not self.has_tb_prefix:
            _mark(line_reason, ctx_warp[context] < 0, 14)
            orphans = plain[ctx_warp[np.searchsorted(structure_line, plain)] < 0]
            problems.extend(self._orphans(block, line_start, line_end, orphans, first_line))
        if decoded is not None:
            reason[candidates] = decoded["reason"]
            line_reason = np.where(line_reason == 0, reason[inst_text], line_reason)

        bad_rows = np.flatnonzero(line_reason)
        if len(bad_rows):
            problems.extend(self._problems(t, inst, inst_line, inst_text, bad_rows, line_reason, opcode,
                                           first_line))
        cut = None
        if problems and not self.options.skip_bad:
            cut = min(problems).line - first_line  # emit what precedes the first bad line, then raise
        if decoded is not None:
            # decoded instruction lines, and the row of ``decoded`` of each
            decoded_text = np.full(len(inst), -1, dtype=np.int64)
            decoded_text[candidates] = np.arange(len(candidates))
            rows = np.flatnonzero(candidate[inst_text])
            yield from self._emit(t, decoded, decoded_text[inst_text[rows]], line_reason[rows], inst_line[rows],
                                  ctx_cta[context[rows]], ctx_warp[context[rows]], cut)
        yield from self._report(problems)

    def _problems(self, t: Tokens, inst, inst_line, inst_text, bad_rows, reason, opcode,
                  first_line) -> list[Problem]:
        """Problems of the instruction lines ``bad_rows`` (line ``inst_line[i]`` has text ``inst[inst_text[i]]``
        of ``t``); only the first when they are to be raised."""
        if self.options.skip_bad:
            return [Problem(first_line + int(inst_line[i])) for i in bad_rows.tolist()]
        i = int(bad_rows[0])  # only the first one is reported
        text = int(inst_text[i])
        line = int(inst[text])
        column = t.column(int(opcode[text]), line) if reason[i] not in (1, 2, 14) else 1
        return [Problem(first_line + int(inst_line[i]), _REASONS[reason[i]], column, t.line_text(line))]

    def _orphans(self, block: bytes, line_start, line_end, orphans: np.ndarray, first_line: int) -> list[Problem]:
        """Problems of counted-only instruction lines that no 'warp = N' line precedes."""
        if self.options.skip_bad:
            return [Problem(first_line + line) for line in orphans.tolist()]
        if len(orphans) == 0:
            return []
        line = int(orphans[0])
        text = block[line_start[line]:line_end[line]].decode("utf-8", "replace").rstrip("\r")
        return [Problem(first_line + line, _REASONS[14], 1, text)]

    def _decode(self, t: Tokens, first, count, opcode):
        """Decode candidate lines (distinct texts) in full, their reasons to be malformed included; None when
        there are none."""
        if len(first) == 0:
            return None
        P = self.prefix
        end = first + count  # one past each line's last token
        last_token = len(t.start) - 1
        local = np.zeros(len(first), dtype=np.int8)  # reasons of these rows

        def at(index):
            return np.minimum(index, last_token)

        longest = -(-int((t.end[opcode] - t.start[opcode]).max()) // 8) * 8
        representative, which = group_rows(token_bytes(t, opcode, longest).view(np.uint64))
        names = token_strings(t, opcode[representative], longest)
        ops = [shared_op(name.decode("ascii", "replace")) for name in names]  # never None: families pre-filtered

        sources, bad = parse_int(t, at(opcode + 1))
        _mark(local, (opcode + 2 > end) | bad | (sources < 0), 3)
        sources = np.where(local == 0, sources, 0)
        width_token = opcode + 2 + sources
        _mark(local, width_token >= end, 4)
        width, bad = parse_int(t, at(width_token))
        _mark(local, bad | (width <= 0), 5)
        _mark(local, width_token + 1 >= end, 4)
        mode, bad = parse_int(t, at(width_token + 1))
        _mark(local, bad | (mode < 0) | (mode > 2), 6)
        pc, bad = parse_hex(t, at(first + P))
        _mark(local, bad | (pc < 0) | (pc >= 1 << 31), 8)
        mask, bad = parse_hex(t, at(first + P + 1))
        _mark(local, bad | (mask < 0) | (mask >= 1 << WARP_SIZE), 9)

        # lanes of the few distinct masks (one byte, 8 lanes, at a time through tables), then copied per row;
        # the extra last mask (0) is that of malformed rows: no active lane
        masks, mask_group = np.unique(mask.astype("<u4"), return_inverse=True)
        mask_bytes = np.append(masks, 0).astype("<u4").view(np.uint8).reshape(-1, 4)
        byte_population = _BYTE_POPULATION[mask_bytes]
        population = byte_population.sum(axis=1)[mask_group]
        address_token = width_token + 2
        needed = np.where(mode == 0, population, np.where(mode == 1, 2, np.maximum(population, 1)))
        _mark(local, address_token + needed > end, 7)
        mask_group = np.where(local == 0, mask_group.reshape(-1), len(masks))
        # rank of each lane among the active lanes: active lanes of the lower bytes + of its own byte below it
        below = np.cumsum(byte_population, axis=1, dtype=np.uint8) - byte_population
        active = np.take(_BYTE_LANES[mask_bytes].reshape(-1, WARP_SIZE), mask_group, axis=0)
        rank = np.take((_BYTE_RANK[mask_bytes] + below[:, :, None]).reshape(-1, WARP_SIZE), mask_group, axis=0)
        any_active = byte_population.any(axis=1)[mask_group]

        base, bad_base = parse_hex(t, at(address_token))
        stride, bad_stride = parse_int(t, at(address_token + 1))
        _mark(local, (mode > 0) & bad_base & any_active, 10)
        _mark(local, (mode == 1) & bad_stride & (population > 1), 11)
        op_always = np.array([op.space == ALWAYS for op in ops])[which]
        cp_async = np.array([op.kind == "cp_async" for op in ops])[which]
        stride = np.where(mode == 1, stride, 0)
        # Mode 1 (nearly every shared line) spans base .. base + (population - 1) * stride: when that whole
        # range is inside the shared window, or outside it, every lane of the row is treated alike, so the
        # window is decided per row.  Other rows (modes 0 and 2, ranges that straddle a bound, sums that
        # could wrap) are decided lane by lane below.
        span = (population.clip(1) - 1) * stride
        low, high = base + np.minimum(span, 0), base + np.maximum(span, 0)
        lane_by_lane = (mode != 1) | (np.abs(base) >= _SAFE_BASE) | (base == -1 << 63) | (np.abs(stride) >= _SAFE_STRIDE)
        offsets = op_always | cp_async  # opcodes whose small addresses are offsets into shared memory
        if self.shmem_base is not None:
            inside = (low >= self.shmem_base) & (high < self.shmem_base + SHARED_WINDOW)
            outside = (high < self.shmem_base) | (low >= self.shmem_base + SHARED_WINDOW)
        else:
            inside, outside = np.zeros(len(first), dtype=bool), np.ones(len(first), dtype=bool)
        offset_inside = (low >= 0) & (high < SHARED_WINDOW)
        offset_outside = (high < 0) | (low >= SHARED_WINDOW)
        keep_row = inside | (outside & offsets & offset_inside)
        lane_by_lane |= ~inside & ~outside | (outside & offsets & ~offset_inside & ~offset_outside)
        lane_by_lane &= any_active
        shift = np.where(inside & ~lane_by_lane, self.shmem_base or 0, 0)
        value = np.multiply(rank, stride[:, None], dtype=np.int64)
        value += (base - shift)[:, None]

        listed = np.flatnonzero((mode != 1) & (local == 0))
        if len(listed):  # modes 0 and 2, lane by lane over their rows only
            row, lane = np.nonzero(active[listed])
            k = rank[listed][row, lane].astype(np.int64)
            token = address_token[listed][row] + k
            lane_mode = mode[listed][row]
            lanes_value = np.zeros(len(row), dtype=np.int64)
            bad_value = np.zeros(len(row), dtype=bool)
            hexa = lane_mode == 0
            lanes_value[hexa], bad_value[hexa] = parse_hex(t, at(token[hexa]))
            # mode 2: base + running sum of the deltas to the previous active lane (wrapping sums cancel exactly)
            step = ~hexa & (k > 0)
            delta = np.zeros(len(row), dtype=np.int64)
            delta[step], bad_value[step] = parse_int(t, at(token[step]))
            running = np.cumsum(delta)
            running -= running[np.flatnonzero(k == 0)][np.cumsum(k == 0) - 1]
            lanes_value = np.where(hexa, lanes_value, base[listed][row] + running)
            value[listed[row], lane] = lanes_value
            bad_rows = np.bincount(row[bad_value], minlength=len(listed)) > 0
            _mark(local, np.isin(np.arange(len(first)), listed[bad_rows]) & (mode == 0), 10)
            _mark(local, np.isin(np.arange(len(first)), listed[bad_rows]), 11)

        dropped = any_active & ~keep_row  # rows with an active lane outside shared memory
        by_lane = np.flatnonzero(lane_by_lane)
        if len(by_lane):
            # shared window: generic (window) addresses become offsets; opcodes that only sometimes touch
            # shared memory keep just the lanes that fall inside the window
            lane_value = value[by_lane]
            if self.shmem_base is not None:
                window = (lane_value >= self.shmem_base) & (lane_value < self.shmem_base + SHARED_WINDOW)
                lane_value -= np.where(window, self.shmem_base, 0)
            else:
                window = np.zeros(lane_value.shape, dtype=bool)
            is_offset = (lane_value >= 0) & (lane_value < SHARED_WINDOW)
            lane_active = active[by_lane]
            lane_keep = lane_active & (window | (is_offset & offsets[by_lane][:, None]))
            value[by_lane] = lane_value
            dropped[by_lane] = (lane_active & ~lane_keep).any(axis=1)
        _mark(local, dropped & op_always, 12)

        if self.has_tb_prefix:
            prefix_values, bad = parse_int(t, at(first[:, None] + np.arange(4)).reshape(-1))
            prefix_values = prefix_values.reshape(-1, 4)
            _mark(local, bad.reshape(-1, 4).any(axis=1) | (prefix_values < 0).any(axis=1), 13)
            gx, gy, _ = self.grid
            cta = prefix_values[:, 0] + prefix_values[:, 1] * gx + prefix_values[:, 2] * gx * gy
            warp = prefix_values[:, 3]
        else:
            cta = warp = None  # from the structure lines above each line
        if self.lineinfo:
            source_line, bad = parse_int(t, at(first + P - 1))
            _mark(local, bad | (source_line < 0) | (source_line > (1 << 31) - 1), 15)
        else:
            source_line = None

        ok = local == 0
        keep = active & (keep_row & ok & ~lane_by_lane)[:, None]
        shared = keep_row & any_active & ok  # rows left with at least one shared lane
        if len(by_lane):
            keep[by_lane] = lane_keep & ok[by_lane][:, None]
            shared[by_lane] = keep[by_lane].any(axis=1)
        np.copyto(value, INACTIVE, where=~keep)
        return {
            "reason": local, "address": value, "shared": shared, "pc": pc, "cta": cta, "warp": warp, "ops": ops,
            "which": which, "opcode_token": opcode, "first": first, "sources": sources, "source_line": source_line,
        }

    def _emit(self, t: Tokens, d: dict, text: np.ndarray, reason: np.ndarray, lines: np.ndarray,
              cta: np.ndarray, warp: np.ndarray, cut: int | None) -> Iterator:
        """Accesses of the decoded lines (line ``lines[k]`` of the block has text ``text[k]`` of ``d`` and
        the (cta, warp) context ``cta[k], warp[k]``) that are well-formed, shared and before ``cut``."""
        keep = (reason == 0) & d["shared"][text]
        if cut is not None:
            keep &= lines < cut
        picked = np.flatnonzero(keep)
        if len(picked) == 0:
            return
        text = text[picked]
        which = d["which"][text]
        ops = d["ops"]
        kind = np.array([op.kind_code for op in ops], dtype=np.int8)[which]
        size = np.array([op.bytes for op in ops], dtype=np.int16)[which]
        matrices = np.array([op.matrices for op in ops], dtype=np.int8)[which]
        pc = d["pc"][text]
        new = self._new_instructions(t, d, text, pc)
        if new:
            yield InstructionsSeen(new)
        n = len(picked)
        execution = np.arange(self.next_execution, self.next_execution + n, dtype=np.int64)
        self.next_execution += n
        if d["cta"] is not None:  # from each line's thread-block/warp prefix
            cta, warp = d["cta"][text], d["warp"][text]
        else:
            cta, warp = cta[picked], warp[picked]
        op = np.array([op.op_code for op in ops], dtype=np.int8)[which]
        accesses = WarpAccesses("", cta.astype(np.int64), warp.astype(np.int32), execution, pc.astype(np.int32),
                                kind, size, matrices, d["address"][text], op)
        yield from chunked(accesses, self.options.chunk_executions)

    def _new_instructions(self, t: Tokens, d: dict, picked: np.ndarray, pc: np.ndarray) -> list[dict]:
        if all(value in self.pcs for value in pd.unique(pc).tolist()):
            return []
        unique, first_index = np.unique(pc, return_index=True)
        rows = []
        for value, index in zip(unique.tolist(), first_index.tolist()):
            if value in self.pcs:
                continue
            self.pcs.add(value)
            i = int(picked[index])
            op = d["ops"][d["which"][i]]
            opcode_token = int(d["opcode_token"][i])
            dests = [t.text(k) for k in range(int(d["first"][i]) + self.prefix + 3, opcode_token)]
            sources = [t.text(k) for k in range(opcode_token + 2, opcode_token + 2 + int(d["sources"][i]))]
            operands = ", ".join(dests + sources)
            rows.append({
                "instruction": value, "pc": value, "opcode": op.opcode,
                "sass": f"{op.opcode} {operands}" if operands else op.opcode,
                "kind": op.kind, "bytes": op.bytes, "matrices": op.matrices,
                "source_line": int(d["source_line"][i]) if d["source_line"] is not None else None,
            })
        return rows


def _mark(reason: np.ndarray, condition: np.ndarray, code: int) -> None:
    """Record ``code`` for rows that meet ``condition`` and have no earlier reason."""
    reason[(reason == 0) & condition] = code
