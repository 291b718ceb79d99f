"""Accel-Sim NVBit traces: ``kernelslist.g`` + ``kernel-N.traceg[.xz]``, or one ``.traceg``.

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

Parsing is vectorized per block of text (see :mod:`traceconf.traces.tokens`):
only the opcode of every line is located; lines whose opcode family can touch
shared memory are decoded in full, all at once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import numpy as np

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.errors import InputError
from traceconf.traces.kernel import BadLines, InstructionsSeen, KernelStart, chunked
from traceconf.traces.options import Problem, ReadOptions
from traceconf.traces.sass import ALWAYS, FAMILIES, shared_op
from traceconf.traces.source import LineBlocks
from traceconf.traces.source import head
from traceconf.traces.tokens import _HEX_DIGIT, Tokens, parse_hex, parse_int, token_bytes, token_strings, tokenize

WARP_SIZE = 32
#: NVBit: "shmem range is [shmem_base_addr, shmem_base_addr+16MB) and the base address is 16MB aligned".
SHARED_WINDOW = 1 << 24

_FAMILY_WIDTH = 8
_FAMILY_KEYS = np.array([f.encode() for f in FAMILIES], dtype=f"S{_FAMILY_WIDTH}").view(np.uint64)
_LANES = np.arange(WARP_SIZE, dtype=np.uint64)

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
)


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
    if head(path, 4096).lstrip().startswith(b"-kernel name"):
        yield from _traceg_events(path, options, 0, None)
        return
    kernels = read_kernelslist(path)
    sizes = [f.stat().st_size if f.exists() else 0 for _, _, f in kernels]
    done = 0
    for (number, line, file), size in zip(kernels, sizes):
        if not file.exists():  # yielded, not raised: the launches before it are complete
            yield InputError(f"kernel trace {file.name} not found", str(path), number, 1, line)
            return
        yield from _traceg_events(file, options, done, sum(sizes))
        done += size


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
    def dim(key: str) -> tuple[int, int, int]:
        match = _DIM.fullmatch(header.get(key, "(1,1,1)"))
        if match is None:
            raise InputError(f"bad -{key} header: {header[key]!r}", path)
        return tuple(int(v) for v in match.groups())

    def number(key: str, default=None):
        value = header.get(key)
        if value is None:
            return default
        try:
            return int(value, 0)
        except ValueError:
            raise InputError(f"bad -{key} header: {value!r}", path) from None

    grid, block = dim("grid dim"), dim("block dim")
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
        """Walk the structure lines; return the (cta, warp) in force after each of them (-1: none)."""
        cta = np.empty(len(lines) + 1, dtype=np.int64)
        warp = np.empty(len(lines) + 1, dtype=np.int64)
        cta[0] = -1 if self.cta is None else self.cta
        warp[0] = -1 if self.warp is None else self.warp
        previous = 0
        for k, line in enumerate(lines.tolist()):
            self.seen += int(inst_before[k]) - previous
            previous = int(inst_before[k])
            text = texts[line].strip()
            number = first_line + line
            match = _STRUCTURE.fullmatch(text)
            if match is None:
                problems.append(Problem(number, "unrecognised line in trace body", 1, text.decode("utf-8", "replace")))
            elif match["begin"] or match["end"] or match["tb"]:
                self._close_warp(number, problems)
                self.warp = None
                if match["tb"]:
                    x, y, z = (int(v) for v in match["tb"].split(b","))
                    gx, gy, _ = self.grid
                    self.cta = x + y * gx + z * gx * gy
            elif match["warp"]:
                self._close_warp(number, problems)
                self.warp = int(match["warp"])
            elif match["insts"]:
                self.expected = (int(match["insts"]), number)
                self.seen = 0
            cta[k + 1] = -1 if self.cta is None else self.cta
            warp[k + 1] = -1 if self.warp is None else self.warp
        self.seen += n_inst - previous
        return cta, warp

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
        t = tokenize(block)
        lines = np.flatnonzero(t.count > 0)
        lead = token_bytes(t, t.first[lines], 2)
        digit = _HEX_DIGIT[lead] != 255
        is_inst = digit[:, 0] & (digit[:, 1] | (lead[:, 1] == 0))
        inst, structure = lines[is_inst], lines[~is_inst]

        problems: list[Problem] = []
        inst_before = np.searchsorted(inst, structure)
        texts = block.split(b"\n") if len(structure) else []
        ctx_cta, ctx_warp = self._structure(texts, structure, inst_before, len(inst), first_line, problems)
        # (cta, warp) in force at each instruction line: that after the last structure line above it
        context = np.searchsorted(structure, inst)

        reason = np.zeros(len(inst), dtype=np.int8)
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
        if not self.has_tb_prefix:
            _mark(reason, ctx_warp[context] < 0, 14)

        rows = np.flatnonzero(candidate)
        decoded = self._decode(t, inst[rows], first[rows], count[rows], opcode[rows], reason, rows, context[rows],
                               ctx_cta, ctx_warp)

        bad_rows = np.flatnonzero(reason)
        if len(bad_rows):
            problems.extend(self._problems(t, inst, bad_rows, reason, opcode, first_line))
        cut = None
        if problems and not self.options.skip_bad:
            cut = min(problems).line - first_line  # emit what precedes the first bad line, then raise
        if decoded is not None:
            yield from self._emit(t, decoded, reason, first_line, cut)
        yield from self._report(problems)

    def _problems(self, t: Tokens, inst, bad_rows, reason, opcode, first_line) -> list[Problem]:
        if self.options.skip_bad:
            return [Problem(first_line + int(inst[i])) for i in bad_rows.tolist()]
        i = int(bad_rows[0])  # only the first one is reported
        line = int(inst[i])
        column = t.column(int(opcode[i]), line) if reason[i] not in (1, 2, 14) else 1
        return [Problem(first_line + line, _REASONS[reason[i]], column, t.line_text(line))]

    def _decode(self, t: Tokens, lines, first, count, opcode, reason, rows, context, ctx_cta, ctx_warp):
        """Decode candidate lines in full; marks malformed ones in ``reason``; None when none are shared."""
        if len(rows) == 0:
            return None
        P = self.prefix
        end = first + count  # one past each line's last token
        last_token = len(t.start) - 1
        local = np.zeros(len(rows), dtype=np.int8)  # reasons of these rows

        def at(index):
            return np.minimum(index, last_token)

        longest = int((t.end[opcode] - t.start[opcode]).max())
        names, which = np.unique(token_strings(t, opcode, longest), return_inverse=True)
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

        active = ((mask.astype(np.uint64)[:, None] >> _LANES) & np.uint64(1)).astype(bool)
        population = active.sum(axis=1)
        address_token = width_token + 2
        needed = np.where(mode == 0, population, np.where(mode == 1, 2, np.maximum(population, 1)))
        _mark(local, address_token + needed > end, 7)
        active &= (local == 0)[:, None]

        # mode 1 (nearly every shared line): base + stride * rank among the active lanes, as (n, 32) arrays
        rank = np.cumsum(active, axis=1) - 1
        base, bad_base = parse_hex(t, at(address_token))
        stride, bad_stride = parse_int(t, at(address_token + 1))
        _mark(local, (mode > 0) & bad_base & active.any(axis=1), 10)
        _mark(local, (mode == 1) & bad_stride & (population > 1), 11)
        value = base[:, None] + rank * np.where(mode == 1, stride, 0)[:, None]
        # modes 0 and 2, lane by lane over their rows only
        listed = np.flatnonzero((mode != 1) & (local == 0))
        if len(listed):
            row, lane = np.nonzero(active[listed])
            k = rank[listed][row, lane]
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
            _mark(local, np.isin(np.arange(len(rows)), listed[bad_rows]) & (mode == 0), 10)
            _mark(local, np.isin(np.arange(len(rows)), listed[bad_rows]), 11)

        # shared window: generic (window) addresses become offsets; opcodes that only sometimes touch
        # shared memory keep just the lanes that fall inside the window
        op_always = np.array([op.space == ALWAYS for op in ops])[which]
        cp_async = np.array([op.kind == "cp_async" for op in ops])[which]
        if self.shmem_base is not None:
            window = (value >= self.shmem_base) & (value < self.shmem_base + SHARED_WINDOW)
            value -= np.where(window, self.shmem_base, 0)
        else:
            window = np.zeros(value.shape, dtype=bool)
        is_offset = (value >= 0) & (value < SHARED_WINDOW)
        keep = active & (window | (is_offset & (op_always | cp_async)[:, None]))
        _mark(local, (active & ~keep).any(axis=1) & op_always, 12)

        if self.has_tb_prefix:
            prefix_values, bad = parse_int(t, at(first[:, None] + np.arange(4)).reshape(-1))
            prefix_values = prefix_values.reshape(-1, 4)
            _mark(local, bad.reshape(-1, 4).any(axis=1) | (prefix_values < 0).any(axis=1), 13)
            gx, gy, _ = self.grid
            cta = prefix_values[:, 0] + prefix_values[:, 1] * gx + prefix_values[:, 2] * gx * gy
            warp = prefix_values[:, 3]
        else:
            cta, warp = ctx_cta[context], ctx_warp[context]
        if self.lineinfo:
            source_line, _ = parse_int(t, at(first + P - 1))
        else:
            source_line = None

        reason[rows] = np.where(reason[rows] == 0, local, reason[rows])
        address = np.where(keep & (local == 0)[:, None], value, INACTIVE)
        return {
            "rows": rows, "lines": lines, "address": address, "pc": pc, "cta": cta,
            "warp": warp, "ops": ops, "which": which, "opcode_token": opcode, "first": first,
            "sources": sources, "source_line": source_line,
        }

    def _emit(self, t: Tokens, d: dict, reason: np.ndarray, first_line: int, cut: int | None) -> Iterator:
        rows = d["rows"]
        keep = (reason[rows] == 0) & (d["address"] != INACTIVE).any(axis=1)
        if cut is not None:
            keep &= d["lines"] < cut
        picked = np.flatnonzero(keep)
        if len(picked) == 0:
            return
        which = d["which"][picked]
        ops = d["ops"]
        kind = np.array([op.kind_code for op in ops], dtype=np.int8)[which]
        size = np.array([op.bytes for op in ops], dtype=np.int16)[which]
        matrices = np.array([op.matrices for op in ops], dtype=np.int8)[which]
        pc = d["pc"][picked]
        new = self._new_instructions(t, d, picked, pc)
        if new:
            yield InstructionsSeen(new)
        n = len(picked)
        execution = np.arange(self.next_execution, self.next_execution + n, dtype=np.int64)
        self.next_execution += n
        accesses = WarpAccesses("", d["cta"][picked].astype(np.int64), d["warp"][picked].astype(np.int32),
                                execution, pc.astype(np.int32), kind, size, matrices, d["address"][picked])
        yield from chunked(accesses, self.options.chunk_executions)

    def _new_instructions(self, t: Tokens, d: dict, picked: np.ndarray, pc: np.ndarray) -> list[dict]:
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
