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
from traceconf.errors import DATA_ERRORS, InputError, as_input_error, internal_message
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
    device_gaps: dict[str, str] = field(default_factory=dict)  # device → why it could not count this kernel
    shared_layout: list[dict] = field(default_factory=list)  # PTX: {"name", "offset", "bytes", ...} per variable


def without_kernel(message: str, kernel: str) -> str:
    """The message without a leading ``kernel K:`` (the engine names it, quoted), for lines that name K once."""
    for named in (f"kernel {kernel}: ", f"kernel {kernel!r}: "):
        message = message.removeprefix(named)
    return message


@dataclass
class KernelFailure:
    """A kernel that could not be analysed, with the reason (reported, not raised).

    ``kernel`` is empty when the input failed between kernels (e.g. a launch whose trace file is missing).
    """

    kernel: str
    error: InputError
    internal: bool = False      # a bug of ours, not bad input (exit status 70)

    def line(self) -> str:
        """``FILE:LINE:COL: kernel K: message`` (the kernel is named once, even if the message already does)."""
        where = self.error.location()
        message = self.error.message
        message = without_kernel(message, self.kernel)
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

    def block_for(self, kernel_row: dict, path: str) -> tuple[int, int, int]:
        from traceconf.emulate.launch import block_and_origin
        try:
            return block_and_origin(self.block, kernel_row)[0]
        except InputError as error:
            raise InputError(error.message, file=path) from None

    def params_for(self, kernel_row: dict, path: str) -> dict[str, int]:
        """--param values keyed by PTX parameter name, for the keys this kernel has (a whole-file run gives
        one list to every kernel; :func:`unused_params` reports keys no kernel has)."""
        from traceconf.emulate.launch import Launch, resolve_params
        return resolve_params(Launch(params=self.params), kernel_row, strict=False)

    def emulator_launch(self, kernel_row: dict, path: str, warp_size: int):
        from traceconf.emulate import Launch
        return Launch(block=self.block_for(kernel_row, path), grid=self.grid, params=self.params_for(kernel_row, path),
                      dynamic_smem=self.dynamic_smem, warp_size=warp_size, ctas=self.ctas,
                      max_steps=self.max_steps)

    def describe(self, kernel_row: dict, path: str) -> dict:
        from traceconf.emulate.launch import block_and_origin
        block, origin = block_and_origin(self.block, kernel_row)
        facts = {"block": list(block), "grid": list(self.grid), "params": self.params_for(kernel_row, path),
                 "dynamic_smem": self.dynamic_smem}
        if origin != "--block":
            facts["block_from"] = origin
        return facts

    def unused_params(self, kernel_rows: list[dict]) -> list[str]:
        """--param keys that name a parameter of none of the kernels."""
        from traceconf.emulate.launch import parameter_name
        return [str(key) for key in self.params
                if not any(parameter_name(key, [p["name"] for p in row.get("params") or []], row["kernel"])
                           for row in kernel_rows)]


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


def analyze_ptx_kernel(module, kernel: str, launch: LaunchRequest, rule_sets: list,
                       progress: Progress | None = None) -> KernelAnalysis:
    """Emulate one kernel once per distinct warp size and run every rule set on it."""
    from traceconf.emulate import emulate

    from traceconf.emulate.launch import launch_problem, static_shared_bytes

    kernel_row = module.kernel(kernel)
    by_warp_size = {}
    summaries, gaps = [], {}
    block = launch.block_for(kernel_row, str(module.path))
    shared_bytes = static_shared_bytes(kernel_row) + launch.dynamic_smem
    for rules in rule_sets:   # a launch the device would refuse is not counted for it (checked before emulating)
        problem = launch_problem(rules, block, launch.grid, shared_bytes)
        if problem:
            gaps[rules.name] = f"the launch cannot run: {problem}"
    check_some_device(gaps, rule_sets)
    for rules in rule_sets:
        if rules.name in gaps:
            continue
        if rules.warp_size not in by_warp_size:
            by_warp_size[rules.warp_size] = emulate(
                module, kernel, launch.emulator_launch(kernel_row, str(module.path), rules.warp_size),
                progress=progress)
        emulation = by_warp_size[rules.warp_size]
        summaries += count_devices(emulation.accesses, [rules], gaps, scale=emulation.scale or 1)
    check_some_device(gaps, rule_sets)
    first = next(iter(by_warp_size.values()))
    acc = first.accesses
    kinds, widths = {}, {}
    if len(acc):
        from traceconf.schemas import KINDS
        ids, where = np.unique(acc.instruction, return_index=True)
        for ident, at in zip(ids.tolist(), where.tolist()):
            kinds[ident] = KINDS[int(acc.kind[at])]
            widths[ident] = int(acc.bytes[at])
    static = _kernel_shared_instructions(module, kernel)
    unresolved_ids = [u["instruction"] for u in first.unresolved]
    info = _instruction_info(module, kernel, list(kinds) + static + unresolved_ids, kinds, widths)
    launch_facts = launch.describe(kernel_row, str(module.path))
    notes = list(first.notes) + [f"not counted on {device}: {reason}" for device, reason in gaps.items()]
    if launch_facts.get("block_from"):
        notes.append(f"block {'×'.join(map(str, launch_facts['block']))} taken from the kernel's "
                     f"{launch_facts['block_from']}" + (" (the largest block it allows): pass --block for the launch "
                                                        "you run" if launch_facts["block_from"] == ".maxntid" else ""))
    if first.scale is not None:
        launch_facts["analysed_ctas"] = len(first.analysed_ctas)
        launch_facts["scale"] = first.scale
    else:
        analysed, total = first.sampled
        launch_facts["sampled_ctas"] = [analysed, total]
        notes.append(f"sampled {analysed} of {total} CTAs: counts cover the sampled CTAs only")
    return KernelAnalysis(kernel=kernel, input_path=str(module.path), input_format="ptx", launch=launch_facts,
                          results=pa.concat_tables(summaries) if summaries else INSTRUCTION_RESULTS.empty_table(),
                          instructions=info, unresolved=first.unresolved, notes=notes,
                          accesses={w: e.accesses for w, e in by_warp_size.items()},
                          shared_layout=[dict(v) for v in first.shared_layout], device_gaps=gaps)


def count_devices(accesses, rule_sets: list, gaps: dict[str, str], scale: int = 1) -> list[pa.Table]:
    """INSTRUCTION_RESULTS of ``accesses`` under every rule set not yet in ``gaps``.

    A rule set that cannot count them (another warp width, an access kind it has no rule for) joins
    ``gaps`` (device → reason) so the other devices' results are kept (:func:`check_some_device` then
    tells whether any device could count the kernel at all).
    """
    from traceconf.engine import analyze, summarize

    out = []
    for rules in rule_sets:
        if rules.name not in gaps:
            try:
                out.append(summarize(analyze(accesses, rules), scale=scale))
            except InputError as error:
                gaps[rules.name] = without_kernel(error.message, accesses.kernel)
    return out


def check_some_device(gaps: dict[str, str], rule_sets: list) -> None:
    """A kernel that no device could count is that kernel's error (the first device's reason)."""
    if len(gaps) == len(rule_sets):
        raise InputError(gaps[rule_sets[0].name])


def run_ptx(path: str | Path, kernels: list[str] | None, launch: LaunchRequest, rule_sets: list,
            progress: Progress | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """Parse a PTX file and analyse the selected kernels; failures are collected per kernel."""
    from traceconf.ptx import parse_file

    module = parse_file(str(path))
    names = select_kernels(module.kernel_names(), kernels, str(path))
    rows = [module.kernel(name) for name in names]
    unused = launch.unused_params(rows)
    if unused:
        listing = "; ".join(f"{row['kernel']}: {', '.join(p['name'] for p in row.get('params') or []) or 'none'}"
                            for row in rows[:5])
        raise InputError(f"--param {', '.join(unused)}: no selected kernel has such a parameter ({listing})",
                         file=str(path))
    done, failed = [], []
    for name in names:
        try:
            done.append(analyze_ptx_kernel(module, name, launch, rule_sets, progress))
        except Exception as error:   # one kernel's failure, whatever it is, never hides the others
            failed.append(kernel_failure(name, error, str(path)))
    return done, failed


def kernel_failure(kernel: str, error: Exception, path: str) -> KernelFailure:
    """The failure of one kernel: bad input (InputError, or a data error a library raised on it) or a bug."""
    if isinstance(error, (InputError, *DATA_ERRORS)):
        return KernelFailure(kernel, as_input_error(error, path))
    failure = KernelFailure(kernel, InputError(internal_message(error), file=path), internal=True)
    failure.error.__cause__ = error      # for --debug and the fuzz harness
    return failure


# ---------------------------------------------------------------------------
# Recorded traces
# ---------------------------------------------------------------------------

def run_trace(path: str | Path, kernels: list[str] | None, rule_sets: list, skip_bad: bool = False,
              progress: Progress | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """Stream a trace through every rule set; memory stays bounded by the chunk size."""
    from traceconf.engine import combine
    from traceconf.traces import detect_format, open_trace

    fmt = detect_format(str(path))
    done, failed = [], []
    traces = iter(open_trace(str(path), skip_bad=skip_bad, progress=progress,
                             on_error=lambda error: failed.append(KernelFailure("", error))))
    while True:
        try:
            trace = next(traces)
        except StopIteration:
            break
        except Exception as error:  # the reader itself failed: keep what came before
            failed.append(kernel_failure("", error, str(path)))
            break
        if not matches(trace.kernel, kernels):
            continue
        partial, notes, gaps = [], [], {}
        try:
            for chunk in trace.chunks():
                partial += count_devices(chunk, rule_sets, gaps)
            check_some_device(gaps, rule_sets)
        except Exception as error:   # bad data in this launch, or a bug: the launches after it are still read
            failure = kernel_failure(trace.kernel, error, str(path))
            failed.append(failure)
            error = failure.error
            if not partial:
                continue
            notes.append(f"incomplete: the trace could not be read past {error.location() or 'an error'}; "
                         "counts cover the accesses before it")
        if trace.bad_lines:
            notes.append(f"{trace.bad_lines} malformed line(s) skipped (--skip-bad)")
        notes += [f"not counted on {device}: {reason}" for device, reason in gaps.items()]
        done.append(KernelAnalysis(kernel=trace.kernel, input_path=str(path), input_format=fmt,
                                   launch=dict(trace.launch), results=combine(partial) if partial
                                   else INSTRUCTION_RESULTS.empty_table(),
                                   instructions=trace_instruction_info(trace), notes=notes, device_gaps=gaps))
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
