"""The launch: as the user gave it (:class:`LaunchRequest`), resolved against one kernel's declaration
(:func:`resolve_launch`: block, grid, parameters by name, ``--data`` buffers loaded once), and checked
against a device's limits.  This is the one place a launch is resolved; the emulators take the resolved
:class:`Launch`."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

from traceconf.errors import InputError
from traceconf.machine import memory_limit as default_memory_limit
from traceconf.machine import resident_bytes
from traceconf.numbers import check_int, read_int
from traceconf.rules import LaunchLimits, RuleSet

#: Default budget of emulated work per kernel, in warp steps: a step of the emulator (one instruction over every
#: thread of the batch of CTAs it runs together) costs the batch's warps plus :data:`STEP_OVERHEAD_WARPS`.  A count
#: of the emulator's own work, so the same launch stops at the same place on an idle and on a loaded machine; a
#: runaway stops cleanly, partial, after a couple of CPU minutes, before ``Launch.max_steps`` (a step costs at least
#: 17).  Real launches need far less (a cuda-samples-shaped bitonic sort, 1,024 CTAs x 512 threads with --data:
#: 2.4e7 at the SASS level; scripts/bench_targets.py prints each).
DEFAULT_WORK_LIMIT = 150_000_000
#: What a step costs beside its warps, in warps: the fixed cost of dispatching one instruction (about 10 us, as
#: much as numpy's work on 16 warps), so that the budget stays near CPU time for narrow batches too.
STEP_OVERHEAD_WARPS = 16


@dataclass
class Launch:
    """How the kernel is launched.

    ``params`` maps a parameter name (as spelled in the PTX) or its 0-based
    index (int or digit string) to an integer value; wider parameters (structs)
    take the little-endian bytes of the integer.  ``ctas`` limits a launch whose
    shared accesses depend on the CTA index to that many CTAs, spread evenly
    over the grid (a stated sample).  ``block`` may be None when the kernel
    declares ``.reqntid``.  ``data`` maps a pointer parameter (name or index)
    to the :class:`~traceconf.emulate.data.DataBuffer` it points to.  ``work_limit`` (warp steps, see
    :data:`DEFAULT_WORK_LIMIT`), ``time_limit`` (wall-clock seconds, off unless given: a result must not depend
    on the machine's load) and ``memory_limit`` (bytes of resident memory of this process) stop the emulation
    cleanly: what was counted is kept, labelled partial.
    ``classes`` lets CTA classes stand for the CTAs they provably count like; ``row_bytes`` is the
    bank-row size (the lcm over the rule sets in use) whose multiples may separate two CTAs of a class.
    """

    block: tuple[int, ...] | None = None
    grid: tuple[int, ...] = (1, 1, 1)
    params: dict = field(default_factory=dict)
    dynamic_smem: int = 0
    warp_size: int = 32
    ctas: int | None = None
    max_steps: int = 10_000_000
    data: dict = field(default_factory=dict)
    time_limit: float | None = None
    work_limit: int | None = DEFAULT_WORK_LIMIT
    memory_limit: int | None = None          # None: traceconf.machine's default share
    classes: bool = True
    row_bytes: int = 128


class LimitReached(Exception):
    """The emulation ran into its work, time or memory limit; ``reason`` says which, in words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Limits:
    """The work, clock and memory budget of one emulation; ``check`` raises :class:`LimitReached`.

    Work is counted by the machines (:meth:`steps_left` before a run, :meth:`spend` after it), so where a
    run stops for work does not depend on the machine's speed or load."""

    def __init__(self, time_limit: float | None, memory_limit: int | None,
                 work_limit: int | None = DEFAULT_WORK_LIMIT):
        self.started = time.monotonic()
        self.time_limit = time_limit
        self.deadline = None if time_limit is None else self.started + float(time_limit)
        self.memory_limit = default_memory_limit(memory_limit)
        self.work_limit = None if work_limit is None else int(work_limit)
        self.work = 0                   # warp steps spent so far

    def steps_left(self, warps: int) -> int | None:
        """Steps a machine of ``warps`` warps may still take (None: no work limit)."""
        if self.work_limit is None:
            return None
        return max(0, self.work_limit - self.work) // (warps + STEP_OVERHEAD_WARPS)

    def spend(self, steps: int, warps: int) -> None:
        self.work += steps * (warps + STEP_OVERHEAD_WARPS)

    def work_reached(self, where: str = "") -> LimitReached:
        at = f" (at {where})" if where else ""
        return LimitReached(f"stopped at the work limit of {self.work_limit:,} warp steps{at}; raise it with "
                            f"--work-limit N")

    def check(self, where: str = "") -> None:
        at = f" (at {where})" if where else ""
        if self.work_limit is not None and self.work >= self.work_limit:
            raise self.work_reached(where)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise LimitReached(f"stopped at the time limit of {self.time_limit:g} s{at}; raise it with "
                               f"--time-limit SECONDS")
        used = resident_bytes()
        if used > self.memory_limit:
            raise LimitReached(f"stopped at the memory limit of {self.memory_limit / 2**30:.1f} GiB{at} "
                               f"({used / 2**30:.1f} GiB in use); raise it with --memory-limit")


def _dims(values, what: str, kernel: str) -> tuple[int, int, int]:
    values = tuple(int(v) for v in values)
    if not 1 <= len(values) <= 3 or any(v < 1 for v in values):
        raise InputError(f"kernel {kernel}: {what} must be 1 to 3 positive sizes, got {values}")
    return values + (1,) * (3 - len(values))


def block_and_origin(block: tuple[int, ...] | None, kernel_row: dict) -> tuple[tuple[int, int, int], str]:
    """The launch block and where it came from: ``--block``, else ``.reqntid``, else ``.maxntid`` (the largest
    block the kernel allows, a stated assumption), else an error naming what is missing."""
    kernel = kernel_row["kernel"]
    required = kernel_row.get("reqntid")
    if block is not None:
        block = _dims(block, "the block", kernel)
        if required and _dims(required, ".reqntid", kernel) != block:
            raise InputError(f"kernel {kernel} requires .reqntid {tuple(required)} but the launch block is {block}")
        maximum = kernel_row.get("maxntid")
        # The driver checks the block's thread count against the product (CUDA's __launch_bounds__ is one
        # number, `.maxntid 256, 1, 1`), not each dimension: a 16x16 block fits `.maxntid 256, 1, 1`.
        if maximum and math.prod(block) > math.prod(_dims(maximum, ".maxntid", kernel)):
            raise InputError(f"kernel {kernel} allows at most .maxntid {tuple(maximum)} = {math.prod(maximum)} "
                             f"threads per block, but the launch block {block} has {math.prod(block)}")
        return block, "--block"
    if required:
        return _dims(required, ".reqntid", kernel), ".reqntid"
    if kernel_row.get("maxntid"):
        return _dims(kernel_row["maxntid"], ".maxntid", kernel), ".maxntid"
    raise InputError(f"kernel {kernel} states neither .reqntid nor .maxntid: pass the launch with --block X[,Y[,Z]] "
                     "(and --grid, --param as the kernel needs)")


def data_parameter(key, kernel_row: dict) -> str:
    """The PTX name of the pointer parameter a ``--data`` key names; unknown keys are errors."""
    names = [p["name"] for p in kernel_row.get("params") or []]
    name = parameter_name(key, kernel_row)
    if name is None:
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            raise InputError(f"kernel {kernel_row['kernel']} has {len(names)} parameter(s); "
                             f"--data index {key} does not exist")
        raise InputError(f"kernel {kernel_row['kernel']} has no parameter {key!r} (parameters: "
                         f"{parameter_listing(kernel_row)}: give the name or the index, e.g. --data 0=...)")
    return name


def resolve_data(launch: Launch, kernel_row: dict, strict: bool = True) -> dict:
    """Parameter name -> DataBuffer of ``--data``; the parameter must be a pointer-sized one.  ``strict``: a
    key the kernel does not have is an error; otherwise it is skipped (one ``--data`` list serves every kernel
    of a file)."""
    found = {}
    for key, buffer in launch.data.items():
        if not strict and parameter_name(key, kernel_row) is None:
            continue
        name = data_parameter(key, kernel_row)
        row = next(p for p in kernel_row.get("params") or [] if p["name"] == name)
        if (row.get("bytes") or 8) not in (4, 8):
            raise InputError(f"--data {key}: parameter {name} of kernel {kernel_row['kernel']} is "
                             f"{row.get('bytes')} bytes, not a pointer")
        found[name] = buffer
    return found


def parameter_name(key: str | int, kernel_row: dict) -> str | None:
    """The PTX parameter a ``--param``/``--data`` key names in the kernel declaration ``kernel_row``, or None
    if the kernel has no such parameter.

    A key is a 0-based index, the PTX name, the name the CUDA source declares (``source_name``, read from
    the source the line info names: nvcc's PTX keeps only ``_Z…_param_N``), or the source name inside an
    old-nvcc PTX name (``matrix_dim`` for ``__cudaparm__Z12lud_diagonalPfii_matrix_dim``).
    """
    params = kernel_row.get("params") or []
    names = [p["name"] for p in params]
    if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
        index = int(key)
        return names[index] if index < len(names) else None
    if key in names:
        return key
    declared = [p["name"] for p in params if p.get("source_name") == key]
    if len(declared) == 1:
        return declared[0]
    prefixed = [n for n in names if n.startswith("__cudaparm_") and n.endswith(f"_{key}")]
    return prefixed[0] if len(prefixed) == 1 else None


def parameter_listing(kernel_row: dict) -> str:
    """``0 odata, 1 idata, 2 width`` (source names where known, else the PTX names), for messages."""
    params = kernel_row.get("params") or []
    return ", ".join(f"{i} {p.get('source_name') or p['name']}" for i, p in enumerate(params)) or "none"


def resolve_params(launch: Launch, kernel_row: dict, strict: bool = True) -> dict[str, int]:
    """Parameter name -> integer value, accepting names or indices.  ``strict``: a key the kernel does not
    have is an error; otherwise it is skipped (one ``--param`` list serves every kernel of a file)."""
    names = [p["name"] for p in kernel_row.get("params") or []]
    kernel = kernel_row["kernel"]
    values = {}
    for key, value in launch.params.items():
        name = parameter_name(key, kernel_row)
        if name is None:
            if not strict:
                continue
            raise InputError(f"kernel {kernel} has no parameter {key!r} (parameters: {parameter_listing(kernel_row)}; "
                             f"give the name or the index, e.g. --param {len(names) - 1}=...)" if names else
                             f"kernel {kernel} has no parameters; --param {key} does not apply")
        option = f"--param {key}"
        number = read_int(value, option) if isinstance(value, str) else int(value)
        row = next(p for p in kernel_row.get("params") or [] if p["name"] == name)
        bits = 8 * (row.get("bytes") or 8)
        # either reading of the bits: nvcc declares an int parameter .u32, and -1 is what it is given
        values[name] = check_int(number, option, what=f"value for {name} (.{row.get('type') or f'b{bits}'})",
                                 low=-(1 << (bits - 1)), high=(1 << bits) - 1)
    return values


def resolve_launch(launch: Launch, kernel_row: dict, strict: bool = True) -> Launch:
    """``launch`` checked against the kernel's declaration (``kernel_row``: its ``kernel``, ``params``,
    ``reqntid``, ``maxntid``), as the emulators take it: the block and grid as three sizes, parameter values
    and ``--data`` buffers by parameter name (see :func:`resolve_params` for ``strict``)."""
    return replace(launch, block=block_and_origin(launch.block, kernel_row)[0],
                   grid=_dims(launch.grid, "the grid", kernel_row["kernel"]),
                   params=resolve_params(launch, kernel_row, strict), data=resolve_data(launch, kernel_row, strict))


#: For a rule set that states no ``[limits]`` (a user file): the largest launch any supported GPU accepts.
UNSTATED_LIMITS = LaunchLimits(
    threads_per_block=1024, block=(1024, 1024, 1024), grid=((1 << 31) - 1, 65535, 65535),
    shared_bytes_per_block=1 << 20,
    source="no [limits] in the rule file: the largest launch any supported GPU accepts")


def static_shared_bytes(kernel_row: dict) -> int:
    """Bytes of the kernel's static shared variables, laid out as the emulator places them."""
    from traceconf.emulate.layout import lay_out
    return lay_out(list(kernel_row.get("shared") or []), 0).static_bytes


def launch_problem(rules: RuleSet, block: tuple[int, int, int], grid: tuple[int, int, int],
                   shared_bytes: int) -> str | None:
    """None, or why the device of ``rules`` cannot run this launch (its ``[limits]``; docs/rules.md)."""
    return (rules.limits or UNSTATED_LIMITS).problem(rules.name, block, grid, shared_bytes)


def launch_gaps(rule_sets: list, block, grid, shared_bytes: int) -> dict[str, str]:
    """Device → why it cannot run this launch (its [limits]): such a launch is not counted for it.  The
    reason names where a launch comes from (the user fixes the option, the launch file or the declaration)."""
    return {rules.name: f"the launch cannot run: {problem} (the launch: --block, --grid, --dynamic-smem, a "
                        "launch file or the kernel's .reqntid)" for rules in rule_sets
            if (problem := launch_problem(rules, block, grid, shared_bytes))}


def missing_params_message(kernel: str, what: str, where: str, names: list[str]) -> str:
    """Why emulation stopped for want of parameters, with the shortest --param spelling that names each
    (an old nvcc's ``__cudaparm_<kernel>_<name>`` is given by its source name)."""
    return (f"kernel {kernel}: the {what} at {where} needs parameter{'s' if len(names) > 1 else ''} "
            f"{', '.join(names)}; pass " + " ".join(f"--param {param_spelling(kernel, n)}=VALUE" for n in names))


def param_spelling(kernel: str, name: str) -> str:
    """The shortest ``--param`` key for a PTX parameter (:func:`parameter_name` accepts each): an old nvcc's
    ``__cudaparm_<kernel>_<name>`` by its source name, new nvcc's and Triton's ``<kernel>_param_<N>`` by its
    index N (their parameters are numbered from 0 in order); other names as written."""
    prefix = f"__cudaparm_{kernel}_"
    if name.startswith(prefix) and name[len(prefix):]:
        return name[len(prefix):]
    index = name.removeprefix(f"{kernel}_param_")
    return index if index != name and index.isdigit() else name


@dataclass
class LaunchRequest:
    """Launch facts as the user gave them (options, a launch file); missing ones may come from the kernel's
    declaration (.reqntid).  :meth:`resolve` makes the :class:`Launch` of one kernel."""

    block: tuple[int, int, int] | None = None
    grid: tuple[int, int, int] = (1, 1, 1)
    params: dict[str, int] = field(default_factory=dict)
    dynamic_smem: int = 0
    ctas: int | None = None
    max_steps: int = 10_000_000
    time_limit: float | None = None          # wall-clock seconds; None: no clock limit (opt-in only)
    work_limit: int | None = None            # warp steps; None: DEFAULT_WORK_LIMIT, 0: no work limit
    memory_limit: int | None = None          # None: the emulator's default share of the machine
    classes: bool = True                     # False: every CTA runs (--exhaustive)
    retain: int | None = None                # executions kept for explain/--suggest (None: RETAINED_EXECUTIONS,
                                             # -1: all of them)
    data: dict[str, str] = field(default_factory=dict)   # NAME_OR_INDEX -> SOURCE (see traceconf.emulate.data)
    seed: int = 0
    entries: tuple = ()                     # LaunchEntry per kernel from a launch file (traceconf.launches)
    given: frozenset[str] = frozenset()     # fields set on the command line: they win over the file
    # --data key -> DataBuffer, each source read once per run (shared by the copies for_kernel makes)
    loaded: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def given_as(cls, block=None, grid=None, params=None, dynamic_smem=None, ctas=None, max_steps=10_000_000,
                 launches=None, data=None, seed=0, time_limit=None, memory_limit=None, work_limit=None,
                 classes=True) -> "LaunchRequest":
        """A launch from options where None means "not given" (a launch file or the kernel may fill it in)."""
        from traceconf.launches import read_launch_file

        given = {name for name, value in (("block", block), ("grid", grid), ("dynamic_smem", dynamic_smem),
                                          ("ctas", ctas)) if value is not None}
        return cls(block=block, grid=grid or (1, 1, 1), params=dict(params or {}), dynamic_smem=dynamic_smem or 0,
                   ctas=ctas, max_steps=max_steps, entries=read_launch_file(launches) if launches else (),
                   given=frozenset(given), data=dict(data or {}), seed=seed, time_limit=time_limit,
                   work_limit=work_limit,
                   memory_limit=memory_limit, classes=classes)

    def kernel_patterns(self) -> list[str] | None:
        """The kernels a launch file names (analysed when no --kernel is given), None without one."""
        return [entry.kernel for entry in self.entries] or None

    def for_kernel(self, kernel_row: dict, path: str) -> "LaunchRequest":
        """This launch with the first launch-file entry that selects the kernel filled in."""
        name = kernel_row["kernel"]
        entry = next((e for e in self.entries if e.selects(name)), None)
        if entry is None:
            return self
        unknown = [key for key in entry.params if parameter_name(key, kernel_row) is None]
        if unknown:
            raise InputError(f"launch file entry {entry.kernel!r}: kernel {name} has no parameter "
                             f"{', '.join(unknown)} (parameters: {parameter_listing(kernel_row)}; give the name or "
                             "the index)", file=path)
        fields = {key: getattr(entry, key) for key in ("block", "grid", "dynamic_smem", "ctas", "max_steps")
                  if getattr(entry, key) is not None and key not in self.given}
        return replace(self, **fields, params={**entry.params, **self.params}, entries=())

    def buffers(self, kernel_row: dict) -> dict:
        """--data key -> DataBuffer for the keys this kernel has; each source is read once (bad ones are
        InputErrors; :meth:`check_params` reports keys no selected kernel has)."""
        from traceconf.emulate.data import load_source
        found = {}
        for key, source in self.data.items():
            if parameter_name(key, kernel_row) is not None:
                if key not in self.loaded:
                    self.loaded[key] = load_source(source, self.seed, f"--data {key}",
                                                   default_memory_limit(self.memory_limit))
                found[key] = self.loaded[key]
        return found

    def resolve(self, kernel_row: dict, path: str) -> tuple[Launch, dict]:
        """The launch of one kernel (its launch-file entry filled in, checked against its declaration
        ``kernel_row``) and its JSON-ready facts (block and where it came from, grid, parameters,
        ``--data`` buffers).  ``warp_size`` and ``row_bytes`` are the counting rule sets' business."""
        request = self.for_kernel(kernel_row, path)
        try:
            block, origin = block_and_origin(request.block, kernel_row)
        except InputError as error:
            raise InputError(error.message, file=path) from None
        launch = resolve_launch(Launch(
            block=block, grid=request.grid, params=request.params, dynamic_smem=request.dynamic_smem,
            ctas=request.ctas, max_steps=request.max_steps, data=request.buffers(kernel_row),
            time_limit=request.time_limit,
            work_limit=DEFAULT_WORK_LIMIT if request.work_limit is None else request.work_limit or None,
            memory_limit=request.memory_limit, classes=request.classes), kernel_row, strict=False)
        facts = {"block": list(launch.block), "grid": list(request.grid), "params": dict(launch.params),
                 "dynamic_smem": request.dynamic_smem}
        if origin != "--block":
            facts["block_from"] = origin
        if request.data:
            facts["data"] = {name: buffer.description for name, buffer in launch.data.items()}
        return launch, facts

    def check_params(self, kernel_rows: list[dict], path: str) -> None:
        """Every --param and --data key names a parameter of at least one selected kernel (one list serves
        them all)."""
        for option, keys in (("--data", self.data), ("--param", self.params)):
            unused = [str(key) for key in keys
                      if not any(parameter_name(key, row) for row in kernel_rows)]
            if unused:
                listing = "; ".join(f"{row['kernel']}: {parameter_listing(row)}" for row in kernel_rows[:5])
                raise InputError(f"{option} {', '.join(unused)}: no selected kernel has such a parameter "
                                 f"({listing}; give the name or the index, e.g. {option} 0=...)", file=path)
