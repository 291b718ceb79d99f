"""The stages wired together: input → program or trace → accesses → engine per device → one analysis per kernel.

Nothing here computes a bank conflict or parses a byte; it only decides which
stage runs on what, and keeps every kernel's outcome (including its failure)
so that one bad kernel never loses the others' results.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np
import pyarrow as pa

from traceconf.accesses import WarpAccesses
from traceconf.errors import InputError, as_input_error, data_errors, internal_message
from traceconf.machine import memory_limit as default_memory_limit
from traceconf.names import matches, readable, select_kernels
from traceconf.programs import DEFAULT_LEVEL
from traceconf.schemas import INSTRUCTION_INFO, INSTRUCTION_RESULTS

if TYPE_CHECKING:
    from traceconf.emulate.launch import LaunchRequest

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
    # device → instruction → why Nsight's Source page may count that instruction otherwise (the rule set's
    # ``model_note`` of an operation the instruction executed: RuleSet.model_notes)
    model_notes: dict[str, dict[int, str]] = field(default_factory=dict)
    # instruction -> the parameters without a value its copy sources are offsets from, taken at cudaMalloc's
    # alignment (traceconf.emulate.allocation); their notes say so where counted from those sources
    aligned_sources: dict[int, list[str]] = field(default_factory=dict)
    # the rule sets this analysis counted (None: all that were asked for); one program per architecture
    # counts a subset each (traceconf.programs.open_programs)
    devices: list[str] | None = None
    # per execution of ``accesses``: how many CTAs it stands for (absent: launch["scale"] for all)
    weights: dict[int, np.ndarray] = field(default_factory=dict)
    complete: bool = True                  # ``accesses`` hold every execution (False: the first ones only)
    shared_layout: list[dict] = field(default_factory=list)  # PTX: {"name", "offset", "bytes", ...} per variable

    def devices_among(self, devices: list[str]) -> list[str]:
        """The devices of ``devices`` (the run's, in its order) that this analysis counted."""
        return [device for device in devices if self.devices is None or device in self.devices]


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
        if self.kernel and message.startswith(f"kernel {self.kernel} "):     # named readably (issue 24, item 7)
            message = f"kernel {readable(self.kernel)} " + message[len(f"kernel {self.kernel} "):]
        elif self.kernel and not message.startswith(f"kernel {self.kernel}"):
            message = f"kernel {readable(self.kernel)}: {message}"
        return f"{where + ': ' if where else 'error: '}{message}"


#: Executions kept per warp size for the reports that look at single executions (explain, --suggest);
#: counting never needs them (each batch is counted and dropped).  32 lanes × 8 B each: ~64 MiB.
RETAINED_EXECUTIONS = 250_000
#: Partial summaries of one device merged once this many have piled up (keeps a long stream's memory flat).
COMBINE_EVERY = 64


class _Counter:
    """Consumes the emulator's batches: counts each under the rule sets of one warp size (a device that
    cannot count them joins ``gaps`` and its partial sums are dropped), keeps the sums, each instruction's
    kind and width, and the first ``retain`` executions (all of them when ``retain`` < 0) for the reports
    that look at single executions."""

    def __init__(self, rule_sets: list, gaps: dict[str, str], retain: int, model_notes: dict):
        self.rule_sets, self.gaps, self.retain, self.model_notes = rule_sets, gaps, retain, model_notes
        self.summaries: dict[str, list[pa.Table]] = {}
        self.kinds: dict[int, str] = {}
        self.widths: dict[int, int] = {}
        self.kept: list[tuple[WarpAccesses, int]] = []
        self.kept_rows = 0
        self.complete = True           # False once an execution was not kept

    def __call__(self, accesses: WarpAccesses, weight: int) -> None:
        from traceconf.engine import combine
        for rules in self.rule_sets:
            if rules.name in self.gaps:
                continue
            counted = count_devices(accesses, [rules], self.gaps, scale=int(weight), model_notes=self.model_notes)
            if rules.name in self.gaps:
                self.summaries.pop(rules.name, None)
                continue
            tables = self.summaries.setdefault(rules.name, [])
            tables += counted
            if len(tables) >= COMBINE_EVERY:
                self.summaries[rules.name] = [combine(tables)]
        kinds, widths = accesses.instruction_kinds()
        for ident, kind in kinds.items():
            self.kinds.setdefault(ident, kind)
            self.widths.setdefault(ident, widths[ident])
        room = len(accesses) if self.retain < 0 else self.retain - self.kept_rows
        if room > 0:
            part = accesses if len(accesses) <= room else accesses.take(np.arange(room))
            self.kept.append((part, int(weight)))
            self.kept_rows += len(part)
        if room < len(accesses):
            self.complete = False

    def tables(self) -> list[pa.Table]:
        return [table for name, tables in self.summaries.items() if name not in self.gaps for table in tables]

    def retained(self, kernel: str, warp_size: int) -> tuple[WarpAccesses, np.ndarray]:
        if not self.kept:
            return WarpAccesses.empty(kernel, warp_size), np.zeros(0, dtype=np.int64)
        accesses = WarpAccesses.concat([a for a, _ in self.kept])
        accesses.execution = np.arange(len(accesses), dtype=np.int64)
        return accesses, np.concatenate([np.full(len(a), w, dtype=np.int64) for a, w in self.kept])


@dataclass
class Counted:
    """One launch emulated per warp size and counted under every rule set that could count it."""

    results: pa.Table                       # INSTRUCTION_RESULTS, devices in the order asked for
    model_notes: dict[str, dict[int, str]]  # KernelAnalysis.model_notes
    emulation: object                       # EmulationResult of the first warp size (its facts are the launch's)
    kinds: dict[int, str]
    widths: dict[int, int]
    accesses: dict[int, WarpAccesses]       # retained executions, by warp size
    weights: dict[int, np.ndarray]
    complete: bool


def emulate_and_count(emulate_for: Callable, rule_sets: list, gaps: dict[str, str],
                      retain: int | None) -> Counted:
    """Emulate once per warp size of the rule sets not in ``gaps`` (``emulate_for(warp_size, row_bytes,
    consume)``: the level's emulator, streaming its batches into ``consume``) and count each batch under
    those rule sets as it comes, so memory does not grow with the grid."""
    from math import lcm

    from traceconf.engine import combine

    by_warp_size: dict[int, list] = {}
    for rules in rule_sets:
        if rules.name not in gaps:
            by_warp_size.setdefault(rules.warp_size, []).append(rules)
    retain = RETAINED_EXECUTIONS if retain is None else retain
    emulations, counters, model_notes = {}, {}, {}
    for warp_size, sets in by_warp_size.items():
        counters[warp_size] = _Counter(sets, gaps, retain, model_notes)
        # classes may only be separated by whole bank rows of every rule set counting them
        emulations[warp_size] = emulate_for(warp_size, lcm(*[int(r.row_bytes) for r in sets]), counters[warp_size])
    check_some_device(gaps, rule_sets)
    tables = [table for counter in counters.values() for table in counter.tables()]
    results = combine(tables) if tables else INSTRUCTION_RESULTS.empty_table()
    if results.num_rows:
        order = {rules.name: index for index, rules in enumerate(rule_sets)}
        ranks = pa.array([order.get(name, len(order)) for name in results.column("device").to_pylist()])
        results = results.append_column("_rank", ranks).sort_by([("_rank", "ascending"),
                                                                 ("instruction", "ascending")]).drop(["_rank"])
    kinds, widths = {}, {}
    for counter in counters.values():
        for ident, kind in counter.kinds.items():
            kinds.setdefault(ident, kind)
            widths.setdefault(ident, counter.widths[ident])
    retained = {w: c.retained(emulations[w].accesses.kernel, w) for w, c in counters.items()}
    model_notes = {device: notes for device, notes in model_notes.items() if device not in gaps}
    return Counted(results=results, model_notes=model_notes, emulation=next(iter(emulations.values())),
                   kinds=kinds, widths=widths,
                   accesses={w: r[0] for w, r in retained.items()}, weights={w: r[1] for w, r in retained.items()},
                   complete=all(c.complete for c in counters.values()))


def scale_facts(emulation, facts: dict, notes: list[str], counted: Counted, retain: int | None) -> None:
    """What the counts stand for (one CTA scaled, classes, a sample, a stop at a limit), as launch facts and
    notes."""
    facts["analysed_ctas"] = emulation.emulated_ctas
    facts["total_ctas"] = emulation.total_ctas
    if emulation.sampled is not None:
        analysed, total = emulation.sampled
        facts["sampled_ctas"] = [analysed, total]
        notes.append(f"sampled {analysed} of {total} CTAs: counts cover the sampled CTAs only")
    elif emulation.scale is not None and not emulation.partial:
        facts["scale"] = emulation.scale
    if emulation.class_count:
        facts["classes"] = emulation.classes
        facts["class_count"] = emulation.class_count
    if emulation.partial:
        facts["partial"] = emulation.partial
        facts["covered_ctas"] = emulation.covered_ctas
    if retain != 0 and not counted.complete:
        kept = sum(len(a) for a in counted.accesses.values())
        notes.append(f"reports that show single executions (explain, --suggest) see the first {kept:,} executions")


def analyze_kernel(program, kernel: str, launch: LaunchRequest, rule_sets: list,
                   progress: Progress | None = None) -> KernelAnalysis:
    """One kernel of any program (:class:`traceconf.programs.base.Program`): the launch resolved once against
    its declaration, then emulated once per distinct warp size, every batch counted under every rule set as
    it comes (memory does not grow with the grid)."""
    from traceconf.emulate.launch import launch_gaps

    path = program.path
    resolved, facts = launch.resolve(program.declaration(kernel), path)
    gaps = launch_gaps(rule_sets, resolved.block, resolved.grid,
                       program.static_shared_bytes(kernel) + resolved.dynamic_smem)
    gaps.update({rules.name: reason for rules in rule_sets
                 if rules.name not in gaps and (reason := program.unsupported(rules))})
    check_some_device(gaps, rule_sets, str(path))

    def emulate_for(warp_size: int, row_bytes: int, consume) -> object:
        return program.emulate(kernel, replace(resolved, warp_size=warp_size, row_bytes=row_bytes), progress,
                               consume)

    counted = emulate_and_count(emulate_for, rule_sets, gaps, launch.retain)
    first = counted.emulation
    unresolved = list(first.unresolved)
    seen = {u["instruction"] for u in unresolved}
    unresolved += [u for u in program.uncounted(kernel) if u["instruction"] not in seen]
    info = program.instruction_info(kernel, list(counted.kinds) + [u["instruction"] for u in unresolved],
                                    counted.kinds, counted.widths)
    facts.update(program.kernel_facts(kernel))
    notes = list(program.notes) + list(first.notes)
    notes += [f"not counted on {device}: {reason}" for device, reason in gaps.items()]
    notes += launch_notes(facts) + program.kernel_notes(kernel)
    scale_facts(first, facts, notes, counted, launch.retain)
    _note_aligned_sources(counted.model_notes, first.aligned_sources, rule_sets)
    return KernelAnalysis(kernel=kernel, input_path=path, input_format=program.input_format, launch=facts,
                          results=counted.results, instructions=info, unresolved=unresolved, notes=notes,
                          accesses=counted.accesses, weights=counted.weights, complete=counted.complete,
                          shared_layout=[dict(v) for v in first.shared_layout], device_gaps=gaps,
                          model_notes=counted.model_notes, aligned_sources=first.aligned_sources)


def _note_aligned_sources(model_notes: dict[str, dict[int, str]], aligned: dict[int, list[str]],
                          rule_sets: list) -> None:
    """A copy counted from global sources that are offsets from parameters without a value (``aligned``:
    instruction -> their names) says so in its note: the count rests on cudaMalloc's alignment."""
    from traceconf.emulate.allocation import with_assumption

    for rules in rule_sets:
        notes, source_notes = model_notes.get(rules.name, {}), set(rules.source_model_notes().values())
        for instruction, names in aligned.items():
            if notes.get(instruction) in source_notes:
                notes[instruction] = with_assumption(notes[instruction], names)


def launch_notes(facts: dict) -> list[str]:
    """What the launch facts assumed (a block from the kernel's declaration), for the report's notes."""
    origin = facts.get("block_from")
    if not origin:
        return []
    return [f"block {'×'.join(map(str, facts['block']))} taken from the kernel's {origin}"
            + (" (the largest block it allows): pass --block for the launch you run" if origin == ".maxntid" else "")]


def count_devices(accesses, rule_sets: list, gaps: dict[str, str], scale: int = 1,
                  model_notes: dict[str, dict[int, str]] | None = None) -> list[pa.Table]:
    """INSTRUCTION_RESULTS of ``accesses`` under every rule set not yet in ``gaps``.

    A rule set that cannot count them (another warp width, an access kind it has no rule for) joins
    ``gaps`` (device → reason) so the other devices' results are kept (:func:`check_some_device` then
    tells whether any device could count the kernel at all).  ``model_notes`` (device → instruction →
    note, :attr:`KernelAnalysis.model_notes`) gains the instructions that executed an operation whose rule
    carries a ``model_note``.
    """
    from traceconf.engine import instruction_results

    out = []
    for rules in rule_sets:
        if rules.name not in gaps:
            try:
                out.append(instruction_results(accesses, rules, scale=scale))
            except InputError as error:
                gaps[rules.name] = without_kernel(error.message, accesses.kernel)
                continue
            if model_notes is not None:
                notes = _model_notes(accesses, rules)
                if notes:
                    model_notes.setdefault(rules.name, {}).update(notes)
    return out


def _model_notes(accesses, rules) -> dict[int, str]:
    """Instruction -> its note under ``rules``: the ``model_note`` of an operation it executed; for an
    instruction every execution of which was counted from its global sources, the ``source_model_note``
    (none where that is empty)."""
    from traceconf.engine import instructions_from_sources

    notes, source_notes = rules.model_notes(), rules.source_model_notes()
    from_sources = instructions_from_sources(accesses, rules) if source_notes else set()
    out = {}
    for code in notes.keys() | source_notes.keys():
        for instruction in _instructions_with_op(accesses, code):
            note = source_notes[code] if instruction in from_sources else notes.get(code, "")
            if note:
                out[instruction] = note
    return out


def _instructions_with_op(accesses, code: int) -> list[int]:
    """Instruction ids of the executions carrying ACCESSES op ``code`` (a WarpAccesses or a long table)."""
    if isinstance(accesses, pa.Table):
        instruction, op = accesses.column("instruction").to_numpy(), accesses.column("op").to_numpy()
    else:
        instruction, op = accesses.instruction, accesses.op
    return np.unique(instruction[op == code]).tolist()


def check_some_device(gaps: dict[str, str], rule_sets: list, path: str | None = None) -> None:
    """A kernel that no device could count is that kernel's error (the first device's reason), located at
    its input ``path`` where given."""
    if len(gaps) == len(rule_sets):
        raise InputError(gaps[rule_sets[0].name], file=path)


def run_program(program, kernels: list[str] | None, launch: LaunchRequest, rule_sets: list,
                progress: Progress | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """Analyse the selected kernels of a program; failures are collected per kernel."""
    unmatched: list[str] = []
    names = select_kernels(program.kernel_names(), kernels or launch.kernel_patterns(), program.path, unmatched)
    launch.check_params([program.declaration(name) for name in names], program.path)
    done, failed = [], []
    for name in names:
        try:
            done.append(analyze_kernel(program, name, launch, rule_sets, progress))
        except Exception as error:   # one kernel's failure, whatever it is, never hides the others
            failed.append(kernel_failure(name, error, program.path))
    if unmatched:
        where = "--kernel" if kernels else "the launch file"
        for analysis in done:
            analysis.notes.append(f"{where} names no kernel of this input for {', '.join(map(repr, unmatched))} "
                                  "(other inputs may have them)")
    return done, failed


def kernel_failure(kernel: str, error: Exception, path: str) -> KernelFailure:
    """The failure of one kernel: bad input (InputError, or a data error a library raised on it) or a bug."""
    if isinstance(error, (InputError, *data_errors())):
        return KernelFailure(kernel, as_input_error(error, path))
    failure = KernelFailure(kernel, InputError(internal_message(error), file=path), internal=True)
    failure.error.__cause__ = error      # for --debug and the fuzz harness
    return failure


# ---------------------------------------------------------------------------
# Recorded traces
# ---------------------------------------------------------------------------

def run_trace(path: str | Path, kernels: list[str] | None, rule_sets: list, skip_bad: bool = False,
              progress: Progress | None = None, part: tuple[int, int] | None = None,
              memory_limit: int | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """Stream a trace through every rule set; memory stays bounded by the chunk size.

    ``part`` reads one share of the input (a distributed run's task): row groups of a canonical Parquet
    table, CTAs of a .tracez (see ``open_trace``).
    """
    from traceconf.engine import combine
    from traceconf.traces import detect_format, open_trace

    fmt = detect_format(str(path))
    done, failed = [], []
    traces = iter(open_trace(str(path), skip_bad=skip_bad, progress=progress, part=part,
                             on_error=lambda error: failed.append(KernelFailure("", error)),
                             memory_limit=default_memory_limit(memory_limit)))
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
        partial, notes, gaps, model_notes = [], [], {}, {}
        try:
            for chunk in trace.chunks():
                partial += count_devices(chunk, rule_sets, gaps, model_notes=model_notes)
            check_some_device(gaps, rule_sets, str(path))
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
        notes += recorded_arch_note(trace.launch, rule_sets)
        done.append(KernelAnalysis(kernel=trace.kernel, input_path=str(path), input_format=fmt,
                                   launch=dict(trace.launch), results=combine(partial) if partial
                                   else INSTRUCTION_RESULTS.empty_table(),
                                   instructions=trace_instruction_info(trace), notes=notes, device_gaps=gaps,
                                   model_notes={d: n for d, n in model_notes.items() if d not in gaps}))
    return done, failed


def recorded_arch_note(launch: dict, rule_sets: list) -> list[str]:
    """A trace that names the GPU it was recorded on (Accel-Sim's ``-binary version = 61``) and is counted
    with another architecture's rules says so, and how to count with the recording GPU's."""
    version = launch.get("binary_version")
    if not version:
        return []
    recorded = f"sm_{version}"
    others = [rules.name for rules in rule_sets if rules.arch != recorded]
    if not others:
        return []
    return [f"recorded on {recorded} (the trace's -binary version = {version}); counted with {', '.join(others)}'s "
            f"rules: -d {recorded} counts with the recording GPU's"]


def input_format(path: str | Path) -> str:
    """'ptx' or the trace format name, decided by content (the trace readers' detector)."""
    from traceconf.traces import detect_format
    return detect_format(str(path))


def run_file(path: str | Path, kernels: list[str] | None, launch: LaunchRequest, rule_sets: list,
             skip_bad: bool = False, progress: Progress | None = None, level: str = DEFAULT_LEVEL,
             ptxas_options: list[str] | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """Any input, one path: PTX (at ``level``, see :mod:`traceconf.programs`), SASS, a CUDA binary or any
    trace (launch options matter for programs; ``skip_bad`` for traces)."""
    from traceconf.programs import PROGRAM_FORMATS, open_programs

    fmt = input_format(path)
    if fmt not in PROGRAM_FORMATS:
        return run_trace(path, kernels, rule_sets, skip_bad, progress, memory_limit=launch.memory_limit)
    done, failed = [], []
    for program, sets in open_programs(path, fmt, level, rule_sets, launch, kernels, ptxas_options):
        analysed, failures = run_program(program, kernels, launch, sets, progress)
        for analysis in analysed:
            analysis.devices = None if len(sets) == len(rule_sets) else [rules.name for rules in sets]
        done += analysed
        failed += [f for f in failures if f.line() not in {known.line() for known in failed}]
    return done, failed


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
