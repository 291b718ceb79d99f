"""The stages wired together: input → accesses → engine per device → one analysis per kernel.

Nothing here computes a bank conflict or parses a byte; it only decides which
stage runs on what, and keeps every kernel's outcome (including its failure)
so that one bad kernel never loses the others' results.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa

from traceconf.accesses import WarpAccesses
from traceconf.errors import DATA_ERRORS, InputError, as_input_error, internal_message
from traceconf.machine import memory_limit as default_memory_limit
from traceconf.names import matches, select_kernels
from traceconf.ptx.opcodes import shared_access_kind, uncounted_shared_op
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
    # per execution of ``accesses``: how many CTAs it stands for (absent: launch["scale"] for all)
    weights: dict[int, np.ndarray] = field(default_factory=dict)
    complete: bool = True                  # ``accesses`` hold every execution (False: the first ones only)
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
    time_limit: float | None = None          # None: the emulator's default (launch.DEFAULT_TIME_LIMIT)
    memory_limit: int | None = None          # None: the emulator's default share of the machine
    classes: bool = True                     # False: every CTA runs (--exhaustive)
    retain: int | None = None                # executions kept for explain/--suggest (None: RETAINED_EXECUTIONS,
                                             # -1: all of them)
    data: dict[str, str] = field(default_factory=dict)   # NAME_OR_INDEX -> SOURCE (see traceconf.emulate.data)
    seed: int = 0
    entries: tuple = ()                     # LaunchEntry per kernel from a launch file (traceconf.launches)
    given: frozenset[str] = frozenset()     # fields set on the command line: they win over the file

    def data_for(self, kernel_row: dict) -> dict:
        """--data buffers keyed by PTX parameter name, for the keys this kernel has (files are read here;
        bad ones are InputErrors; :meth:`check_params` reports keys no selected kernel has)."""
        from traceconf.emulate.data import load_source
        from traceconf.emulate.launch import parameter_name
        names = [p["name"] for p in kernel_row.get("params") or []]
        found = {}
        for key, source in self.data.items():
            name = parameter_name(key, names, kernel_row["kernel"])
            if name is not None:
                found[name] = load_source(source, self.seed, f"--data {key}",
                                          default_memory_limit(self.memory_limit))
        return found

    @classmethod
    def given_as(cls, block=None, grid=None, params=None, dynamic_smem=None, ctas=None, max_steps=10_000_000,
                 launches=None, data=None, seed=0, time_limit=None, memory_limit=None,
                 classes=True) -> "LaunchRequest":
        """A launch from options where None means "not given" (a launch file or the kernel may fill it in)."""
        from traceconf.launches import read_launch_file

        given = {name for name, value in (("block", block), ("grid", grid), ("dynamic_smem", dynamic_smem),
                                          ("ctas", ctas)) if value is not None}
        return cls(block=block, grid=grid or (1, 1, 1), params=dict(params or {}), dynamic_smem=dynamic_smem or 0,
                   ctas=ctas, max_steps=max_steps, entries=read_launch_file(launches) if launches else (),
                   given=frozenset(given), data=dict(data or {}), seed=seed, time_limit=time_limit,
                   memory_limit=memory_limit, classes=classes)

    def for_kernel(self, kernel_row: dict, path: str) -> "LaunchRequest":
        """This launch with the first launch-file entry that selects the kernel filled in."""
        from traceconf.emulate.launch import parameter_name

        name = kernel_row["kernel"]
        entry = next((e for e in self.entries if e.selects(name)), None)
        if entry is None:
            return self
        names = [p["name"] for p in kernel_row.get("params") or []]
        unknown = [key for key in entry.params if parameter_name(key, names, name) is None]
        if unknown:
            raise InputError(f"launch file entry {entry.kernel!r}: kernel {name} has no parameter "
                             f"{', '.join(unknown)} (parameters: {', '.join(names) or 'none'})", file=path)
        fields = {key: getattr(entry, key) for key in ("block", "grid", "dynamic_smem", "ctas", "max_steps")
                  if getattr(entry, key) is not None and key not in self.given}
        return replace(self, **fields, params={**entry.params, **self.params}, entries=())

    def kernel_patterns(self) -> list[str] | None:
        """The kernels a launch file names (analysed when no --kernel is given), None without one."""
        return [entry.kernel for entry in self.entries] or None

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

    def emulator_launch(self, kernel_row: dict, path: str, warp_size: int, row_bytes: int = 128):
        from traceconf.emulate import Launch
        from traceconf.emulate.launch import DEFAULT_TIME_LIMIT
        return Launch(block=self.block_for(kernel_row, path), grid=self.grid, params=self.params_for(kernel_row, path),
                      dynamic_smem=self.dynamic_smem, warp_size=warp_size, ctas=self.ctas,
                      max_steps=self.max_steps, data=self.data_for(kernel_row),
                      time_limit=DEFAULT_TIME_LIMIT if self.time_limit is None else self.time_limit,
                      memory_limit=self.memory_limit, classes=self.classes, row_bytes=row_bytes)

    def describe(self, kernel_row: dict, path: str) -> dict:
        from traceconf.emulate.launch import block_and_origin
        block, origin = block_and_origin(self.block, kernel_row)
        facts = {"block": list(block), "grid": list(self.grid), "params": self.params_for(kernel_row, path),
                 "dynamic_smem": self.dynamic_smem}
        if origin != "--block":
            facts["block_from"] = origin
        if self.data:
            facts["data"] = {name: buffer.description for name, buffer in self.data_for(kernel_row).items()}
        return facts

    def check_params(self, kernel_rows: list[dict], path: str) -> None:
        """Every --param key names a parameter of at least one selected kernel (one list serves them all)."""
        for option, keys in (("--data", self.data), ("--param", self.params)):
            self._check_keys(option, keys, kernel_rows, path)

    @staticmethod
    def _check_keys(option: str, keys, kernel_rows: list[dict], path: str) -> None:
        from traceconf.emulate.launch import parameter_name
        unused = [str(key) for key in keys
                  if not any(parameter_name(key, [p["name"] for p in row.get("params") or []], row["kernel"])
                             for row in kernel_rows)]
        if unused:
            listing = "; ".join(f"{row['kernel']}: {', '.join(p['name'] for p in row.get('params') or []) or 'none'}"
                                for row in kernel_rows[:5])
            raise InputError(f"{option} {', '.join(unused)}: no selected kernel has such a parameter ({listing})",
                             file=path)


def _instruction_info(module, kernel: str, ids: Iterable[int], kinds: dict[int, str],
                      widths: dict[int, int]) -> pa.Table:
    ordered = sorted(set(ids))
    # Instruction ids are module-wide ordinals, i.e. row numbers of the INSTRUCTIONS table.
    rows = module.instructions.take(pa.array(ordered, pa.int64())).to_pylist()
    out = []
    for ident, row in zip(ordered, rows):
        out.append({"kernel": kernel, "instruction": ident, "text": row["text"],
                    "kind": kinds.get(ident) or shared_access_kind(row["opcode"], row["state_space"], row["modifiers"])
                    or (uncounted_shared_op(row["opcode"], row["modifiers"]) or (row["opcode"],))[0],
                    "bytes": widths.get(ident, row["access_bytes"] or 0), "ptx_line": row["ptx_line"],
                    "pc": None, "source_file": row["source_file"], "source_line": row["source_line"]})
    return pa.Table.from_pylist(out, schema=INSTRUCTION_INFO)


def _kernel_shared_instructions(module, kernel: str) -> tuple[list[int], list[dict]]:
    """Ids of the kernel's shared-memory instructions, and an unresolved entry for each one that is shared-memory
    work but no counted access (TMA copies, wgmma operands)."""
    ids, uncounted = [], []
    for row in module.instructions_of(kernel):
        if shared_access_kind(row["opcode"], row["state_space"], row["modifiers"]):
            ids.append(row["instruction"])
        elif (found := uncounted_shared_op(row["opcode"], row["modifiers"])):
            ids.append(row["instruction"])
            uncounted.append({"instruction": int(row["instruction"]), "ptx": row["text"],
                              "ptx_line": int(row["ptx_line"]), "reason": found[1]})
    return ids, uncounted


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

    def __init__(self, rule_sets: list, gaps: dict[str, str], retain: int):
        self.rule_sets, self.gaps, self.retain = rule_sets, gaps, retain
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
            counted = count_devices(accesses, [rules], self.gaps, scale=int(weight))
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
    emulations, counters = {}, {}
    for warp_size, sets in by_warp_size.items():
        counters[warp_size] = _Counter(sets, gaps, retain)
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
    return Counted(results=results, emulation=next(iter(emulations.values())), kinds=kinds, widths=widths,
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


def analyze_ptx_kernel(module, kernel: str, launch: LaunchRequest, rule_sets: list,
                       progress: Progress | None = None) -> KernelAnalysis:
    """Emulate one kernel once per distinct warp size, counting every batch under every rule set as it
    comes (memory does not grow with the grid)."""
    from traceconf.emulate import emulate
    from traceconf.emulate.launch import static_shared_bytes

    kernel_row = module.kernel(kernel)
    path = str(module.path)
    block = launch.block_for(kernel_row, path)
    gaps = launch_gaps(rule_sets, block, launch.grid, static_shared_bytes(kernel_row) + launch.dynamic_smem)
    check_some_device(gaps, rule_sets)

    def emulate_for(warp_size: int, row_bytes: int, consume) -> object:
        return emulate(module, kernel, launch.emulator_launch(kernel_row, path, warp_size, row_bytes),
                       progress=progress, consume=consume)

    counted = emulate_and_count(emulate_for, rule_sets, gaps, launch.retain)
    first = counted.emulation
    static, uncounted = _kernel_shared_instructions(module, kernel)
    unresolved = list(first.unresolved)
    unresolved += [u for u in uncounted if u["instruction"] not in {v["instruction"] for v in unresolved}]
    unresolved_ids = [u["instruction"] for u in unresolved]
    info = _instruction_info(module, kernel, list(counted.kinds) + static + unresolved_ids, counted.kinds,
                             counted.widths)
    launch_facts = launch.describe(kernel_row, path)
    notes = list(first.notes) + [f"not counted on {device}: {reason}" for device, reason in gaps.items()]
    notes += launch_notes(launch_facts)
    scale_facts(first, launch_facts, notes, counted, launch.retain)
    return KernelAnalysis(kernel=kernel, input_path=path, input_format="ptx", launch=launch_facts,
                          results=counted.results, instructions=info, unresolved=unresolved, notes=notes,
                          accesses=counted.accesses, weights=counted.weights, complete=counted.complete,
                          shared_layout=[dict(v) for v in first.shared_layout], device_gaps=gaps)


def launch_notes(facts: dict) -> list[str]:
    """What the launch facts assumed (a block from the kernel's declaration), for the report's notes."""
    origin = facts.get("block_from")
    if not origin:
        return []
    return [f"block {'×'.join(map(str, facts['block']))} taken from the kernel's {origin}"
            + (" (the largest block it allows): pass --block for the launch you run" if origin == ".maxntid" else "")]


def launch_gaps(rule_sets: list, block, grid, shared_bytes: int) -> dict[str, str]:
    """Device → why it cannot run this launch (its [limits]): such a launch is not counted for it."""
    from traceconf.emulate.launch import launch_problem
    return {rules.name: f"the launch cannot run: {problem}" for rules in rule_sets
            if (problem := launch_problem(rules, block, grid, shared_bytes))}


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
    names = select_kernels(module.kernel_names(), kernels or launch.kernel_patterns(), str(path))
    launch.check_params([module.kernel(name) for name in names], str(path))
    done, failed = [], []
    for name in names:
        try:
            done.append(analyze_ptx_kernel(module, name, launch.for_kernel(module.kernel(name), str(path)), rule_sets,
                                           progress))
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
             skip_bad: bool = False, progress: Progress | None = None, level: str = "ptx",
             ptxas_options: list[str] | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """PTX, SASS, a CUDA binary or any trace: whatever the file holds (launch options matter for PTX and SASS).

    ``level`` (PTX input): ``ptx`` analyses the PTX as written, ``sass`` what ptxas makes of it, ``auto`` the
    SASS when a suitable ptxas exists (see :mod:`traceconf.sass.analyze`).
    """
    fmt = input_format(path)
    if fmt == "ptx":
        if level != "ptx":
            from traceconf.sass.analyze import run_ptx_at_level
            return run_ptx_at_level(path, kernels, launch, rule_sets, level, ptxas_options, progress)
        return run_ptx(path, kernels, launch, rule_sets, progress)
    if fmt in ("sass", "cuda_binary"):
        from traceconf.sass.analyze import run_sass_file
        return run_sass_file(path, kernels, launch, rule_sets, progress)
    return run_trace(path, kernels, rule_sets, skip_bad, progress, memory_limit=launch.memory_limit)


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
