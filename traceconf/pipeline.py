"""The stages wired together: input → accesses → engine per device → one analysis per kernel.

Nothing here computes a bank conflict or parses a byte; it only decides which
stage runs on what, and keeps every kernel's outcome (including its failure)
so that one bad kernel never loses the others' results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa

from traceconf.accesses import WarpAccesses
from traceconf.errors import InputError
from traceconf.names import matches, select_kernels
from traceconf.ptx.opcodes import shared_access_kind
from traceconf.schemas import INSTRUCTION_INFO, INSTRUCTION_RESULTS

Progress = Callable[[int, int], None]


@dataclass
class KernelAnalysis:
    """Everything the reports need about one kernel (launch) of one input."""

    kernel: str
    input_path: str
    input_format: str                      # "ptx" or a trace format name
    launch: dict                           # JSON-ready launch facts
    results: pa.Table                      # INSTRUCTION_RESULTS, all devices
    instructions: pa.Table                 # INSTRUCTION_INFO, every shared-memory instruction
    unresolved: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    accesses: dict[int, WarpAccesses] = field(default_factory=dict)  # by warp size; empty for streamed traces
    # per execution of ``accesses``: how many CTAs it stands for (absent: launch["scale"] for all)
    weights: dict[int, np.ndarray] = field(default_factory=dict)
    shared_layout: list[dict] = field(default_factory=list)  # PTX: {"name", "offset", "bytes", ...} per variable


@dataclass
class KernelFailure:
    """A kernel that could not be analysed, with the reason (reported, not raised).

    ``kernel`` is empty when the input failed between kernels (e.g. a launch whose trace file is missing).
    """

    kernel: str
    error: InputError

    def line(self) -> str:
        """``FILE:LINE:COL: kernel K: message`` (the kernel is named once, even if the message already does)."""
        where = self.error.location()
        message = self.error.message
        if self.kernel and not message.startswith(f"kernel {self.kernel}"):
            message = f"kernel {self.kernel}: {message}"
        return f"{where + ': ' if where else 'error: '}{message}"


# ---------------------------------------------------------------------------
# PTX
# ---------------------------------------------------------------------------

@dataclass
class LaunchRequest:
    """Launch facts as the user gave them; missing ones may come from the PTX (.reqntid)."""

    block: tuple[int, int, int] | None = None
    grid: tuple[int, int, int] = (1, 1, 1)
    params: dict[str, int] = field(default_factory=dict)
    dynamic_smem: int = 0
    ctas: int | None = None
    max_steps: int = 10_000_000
    time_limit: float | None = None          # None: the emulator's default (launch.DEFAULT_TIME_LIMIT)
    memory_limit: int | None = None          # None: the emulator's default share of the machine
    classes: bool = True
    retain: int | None = None                # executions kept for explain/--suggest (None: RETAINED_EXECUTIONS)

    def block_for(self, kernel_row: dict, path: str) -> tuple[int, int, int]:
        if self.block is not None:
            return self.block
        required = kernel_row.get("reqntid")
        if required:
            return tuple(list(required) + [1] * (3 - len(required)))
        raise InputError(f"kernel {kernel_row['kernel']} has no .reqntid: pass the block size with --block X[,Y[,Z]]",
                         file=path)

    def params_for(self, kernel_row: dict, path: str) -> dict[str, int]:
        """--param values keyed by PTX parameter name; a 0-based index names the parameter at that position."""
        names = [p["name"] for p in kernel_row.get("params") or []]
        named = {}
        for key, value in self.params.items():
            if str(key).isdigit():
                index = int(key)
                if index >= len(names):
                    raise InputError(f"--param {key}: kernel {kernel_row['kernel']} has {len(names)} parameter(s)",
                                     file=path)
                key = names[index]
            elif key not in names:
                listing = ", ".join(names) or "none"
                raise InputError(f"--param {key}: kernel {kernel_row['kernel']} has no such parameter "
                                 f"(parameters: {listing})", file=path)
            named[key] = value
        return named

    def emulator_launch(self, kernel_row: dict, path: str, warp_size: int, row_bytes: int = 128):
        from traceconf.emulate import Launch
        from traceconf.emulate.launch import DEFAULT_TIME_LIMIT
        return Launch(block=self.block_for(kernel_row, path), grid=self.grid, params=self.params_for(kernel_row, path),
                      dynamic_smem=self.dynamic_smem, warp_size=warp_size, ctas=self.ctas,
                      max_steps=self.max_steps,
                      time_limit=DEFAULT_TIME_LIMIT if self.time_limit is None else self.time_limit,
                      memory_limit=self.memory_limit, classes=self.classes, row_bytes=row_bytes)

    def describe(self, kernel_row: dict, path: str) -> dict:
        return {"block": list(self.block_for(kernel_row, path)), "grid": list(self.grid),
                "params": self.params_for(kernel_row, path), "dynamic_smem": self.dynamic_smem}


def _instruction_info(module, kernel: str, ids: Iterable[int], kinds: dict[int, str],
                      widths: dict[int, int]) -> pa.Table:
    ordered = sorted(set(ids))
    # Instruction ids are module-wide ordinals, i.e. row numbers of the INSTRUCTIONS table.
    rows = module.instructions.take(pa.array(ordered, pa.int64())).to_pylist()
    out = []
    for ident, row in zip(ordered, rows):
        out.append({"kernel": kernel, "instruction": ident, "text": row["text"],
                    "kind": kinds.get(ident) or shared_access_kind(row["opcode"], row["state_space"]) or row["opcode"],
                    "bytes": widths.get(ident, row["access_bytes"] or 0), "ptx_line": row["ptx_line"],
                    "pc": None, "source_file": row["source_file"], "source_line": row["source_line"]})
    return pa.Table.from_pylist(out, schema=INSTRUCTION_INFO)


def _kernel_shared_instructions(module, kernel: str) -> list[int]:
    return [r["instruction"] for r in module.instructions_of(kernel) if shared_access_kind(r["opcode"], r["state_space"])]


#: Executions kept per warp size for the reports that look at single executions (explain, --suggest);
#: counting never needs them (each batch is counted and dropped).  32 lanes × 8 B each: ~64 MiB.
RETAINED_EXECUTIONS = 250_000
#: Partial summaries merged once this many have piled up (keeps a long stream's memory flat).
COMBINE_EVERY = 64


class _Counter:
    """Consumes the emulator's batches: counts each under every rule set of one warp size, keeps the sums
    and a bounded sample of the executions (the first batches, whole) for the reports."""

    def __init__(self, rule_sets: list, retain: int):
        self.rule_sets, self.retain = rule_sets, retain
        self.summaries: list = []
        self.kept: list[tuple[WarpAccesses, int]] = []
        self.kept_rows = 0
        self.complete = True           # False once a batch was not kept

    def __call__(self, accesses: WarpAccesses, weight: int) -> None:
        from traceconf.engine import analyze, combine, summarize
        for rules in self.rule_sets:
            self.summaries.append(summarize(analyze(accesses, rules), scale=int(weight)))
        if len(self.summaries) >= COMBINE_EVERY:
            self.summaries = [combine(self.summaries)]
        room = self.retain - self.kept_rows
        if room > 0:
            part = accesses if len(accesses) <= room else accesses.take(np.arange(room))
            self.kept.append((part, int(weight)))
            self.kept_rows += len(part)
        if room < len(accesses):
            self.complete = False

    def retained(self, kernel: str, warp_size: int) -> tuple[WarpAccesses, np.ndarray]:
        if not self.kept:
            return WarpAccesses.empty(kernel, warp_size), np.zeros(0, dtype=np.int64)
        accesses = WarpAccesses.concat([a for a, _ in self.kept])
        accesses.execution = np.arange(len(accesses), dtype=np.int64)
        return accesses, np.concatenate([np.full(len(a), w, dtype=np.int64) for a, w in self.kept])


def analyze_ptx_kernel(module, kernel: str, launch: LaunchRequest, rule_sets: list,
                       progress: Progress | None = None, retain: int = RETAINED_EXECUTIONS) -> KernelAnalysis:
    """Emulate one kernel once per distinct warp size, counting every batch under every rule set as it
    comes (memory does not grow with the grid)."""
    from math import lcm

    from traceconf.emulate import emulate
    from traceconf.engine import combine

    kernel_row = module.kernel(kernel)
    by_warp_size: dict[int, list] = {}
    for rules in rule_sets:
        by_warp_size.setdefault(rules.warp_size, []).append(rules)
    emulations, counters = {}, {}
    retain = retain if launch.retain is None else launch.retain
    for warp_size, sets in by_warp_size.items():
        row_bytes = lcm(*[int(r.row_bytes) for r in sets])
        counters[warp_size] = _Counter(sets, retain)
        emulations[warp_size] = emulate(
            module, kernel, launch.emulator_launch(kernel_row, str(module.path), warp_size, row_bytes),
            progress=progress, consume=counters[warp_size])
    order = {rules.name: index for index, rules in enumerate(rule_sets)}
    results = combine([table for counter in counters.values() for table in counter.summaries])
    if results.num_rows:
        ranks = pa.array([order.get(name, len(order)) for name in results.column("device").to_pylist()])
        results = results.append_column("_rank", ranks).sort_by([("_rank", "ascending"),
                                                                 ("instruction", "ascending")]).drop(["_rank"])
    first_size = next(iter(emulations))
    first = emulations[first_size]
    retained = {w: c.retained(kernel, w) for w, c in counters.items()}
    acc = retained[first_size][0]
    kinds, widths = {}, {}
    if len(acc):
        from traceconf.schemas import KINDS
        ids, where = np.unique(acc.instruction, return_index=True)
        for ident, at in zip(ids.tolist(), where.tolist()):
            kinds[ident] = KINDS[int(acc.kind[at])]
            widths[ident] = int(acc.bytes[at])
    if results.num_rows:
        for row in results.select(["instruction", "kind", "bytes"]).to_pylist():
            kinds.setdefault(row["instruction"], row["kind"])
            widths.setdefault(row["instruction"], row["bytes"])
    static = _kernel_shared_instructions(module, kernel)
    unresolved_ids = [u["instruction"] for u in first.unresolved]
    info = _instruction_info(module, kernel, list(kinds) + static + unresolved_ids, kinds, widths)
    launch_facts = launch.describe(kernel_row, str(module.path))
    notes = list(first.notes)
    launch_facts["analysed_ctas"] = first.emulated_ctas
    launch_facts["total_ctas"] = first.total_ctas
    if first.sampled is not None:
        analysed, total = first.sampled
        launch_facts["sampled_ctas"] = [analysed, total]
        notes.append(f"sampled {analysed} of {total} CTAs: counts cover the sampled CTAs only")
    elif first.scale is not None and not first.partial:
        launch_facts["scale"] = first.scale
    if first.classes:
        launch_facts["classes"] = first.classes
    if first.partial:
        launch_facts["partial"] = first.partial
        launch_facts["covered_ctas"] = first.covered_ctas
    if retain and not all(c.complete for c in counters.values()):
        kept = len(acc)
        notes.append(f"reports that show single executions (explain, --suggest) see the first {kept:,} executions")
    return KernelAnalysis(kernel=kernel, input_path=str(module.path), input_format="ptx", launch=launch_facts,
                          results=results, instructions=info, unresolved=first.unresolved, notes=notes,
                          accesses={w: r[0] for w, r in retained.items()},
                          weights={w: r[1] for w, r in retained.items()},
                          shared_layout=[dict(v) for v in first.shared_layout])


def run_ptx(path: str | Path, kernels: list[str] | None, launch: LaunchRequest, rule_sets: list,
            progress: Progress | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """Parse a PTX file and analyse the selected kernels; failures are collected per kernel."""
    from traceconf.ptx import parse_file

    module = parse_file(str(path))
    names = select_kernels(module.kernel_names(), kernels, str(path))
    done, failed = [], []
    for name in names:
        try:
            done.append(analyze_ptx_kernel(module, name, launch, rule_sets, progress))
        except InputError as error:
            failed.append(KernelFailure(name, error))
    return done, failed


# ---------------------------------------------------------------------------
# Recorded traces
# ---------------------------------------------------------------------------

def run_trace(path: str | Path, kernels: list[str] | None, rule_sets: list, skip_bad: bool = False,
              progress: Progress | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """Stream a trace through every rule set; memory stays bounded by the chunk size."""
    from traceconf.engine import analyze, combine, summarize
    from traceconf.traces import detect_format, open_trace

    fmt = detect_format(str(path))
    done, failed = [], []
    traces = iter(open_trace(str(path), skip_bad=skip_bad, progress=progress))
    while True:
        try:
            trace = next(traces)
        except StopIteration:
            break
        except InputError as error:  # e.g. a launch whose trace file is missing: keep what came before
            failed.append(KernelFailure("", error))
            break
        if not matches(trace.kernel, kernels):
            continue
        partial, notes = [], []
        try:
            for chunk in trace.chunks():
                partial += [summarize(analyze(chunk, rules)) for rules in rule_sets]
        except InputError as error:
            failed.append(KernelFailure(trace.kernel, error))
            if not partial:
                continue
            notes.append(f"incomplete: the trace could not be read past {error.location() or 'an error'}; "
                         "counts cover the accesses before it")
        if trace.bad_lines:
            notes.append(f"{trace.bad_lines} malformed line(s) skipped (--skip-bad)")
        done.append(KernelAnalysis(kernel=trace.kernel, input_path=str(path), input_format=fmt,
                                   launch=dict(trace.launch), results=combine(partial) if partial
                                   else INSTRUCTION_RESULTS.empty_table(),
                                   instructions=trace_instruction_info(trace), notes=notes))
    return done, failed


def input_format(path: str | Path) -> str:
    """'ptx' or the trace format name, decided by content (the trace readers' detector)."""
    from traceconf.traces import detect_format
    return detect_format(str(path))


def run_file(path: str | Path, kernels: list[str] | None, launch: LaunchRequest, rule_sets: list,
             skip_bad: bool = False, progress: Progress | None = None
             ) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """PTX or any trace: whatever the file holds (launch options only matter for PTX)."""
    if input_format(path) == "ptx":
        return run_ptx(path, kernels, launch, rule_sets, progress)
    return run_trace(path, kernels, rule_sets, skip_bad, progress)


def trace_instruction_info(trace) -> pa.Table:
    table = trace.instructions
    n = table.num_rows

    def column(name, default):
        return table.column(name) if name in table.column_names else pa.array([default] * n)

    return pa.table({
        "kernel": pa.array([trace.kernel] * n, pa.string()),
        "instruction": column("instruction", 0).cast(pa.int32()),
        "text": column("sass", "").cast(pa.string()),
        "kind": column("kind", "").cast(pa.string()),
        "bytes": column("bytes", 0).cast(pa.int16()),
        "ptx_line": pa.nulls(n, pa.int32()),
        "pc": column("pc", None).cast(pa.int64()),
        "source_file": column("source_file", None).cast(pa.string()),
        "source_line": column("source_line", None).cast(pa.int32()),
    }, schema=INSTRUCTION_INFO)
