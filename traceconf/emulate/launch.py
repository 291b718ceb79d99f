"""Launch configuration of one emulated kernel, and its checks against the kernel's declaration."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from traceconf.errors import InputError
from traceconf.machine import memory_limit as default_memory_limit
from traceconf.machine import resident_bytes
from traceconf.numbers import check_int, read_int
from traceconf.rules import LaunchLimits, RuleSet

#: Default wall-clock budget of one kernel's emulation, seconds (a runaway stops cleanly, partial).
DEFAULT_TIME_LIMIT = 30.0


@dataclass
class Launch:
    """How the kernel is launched.

    ``params`` maps a parameter name (as spelled in the PTX) or its 0-based
    index (int or digit string) to an integer value; wider parameters (structs)
    take the little-endian bytes of the integer.  ``ctas`` limits a launch whose
    shared accesses depend on the CTA index to that many CTAs, spread evenly
    over the grid (a stated sample).  ``block`` may be None when the kernel
    declares ``.reqntid``.  ``data`` maps a pointer parameter (name or index)
    to the :class:`~traceconf.emulate.data.DataBuffer` it points to.  ``time_limit`` (seconds) and ``memory_limit`` (bytes of resident
    memory of this process) stop the emulation cleanly: what was counted is kept, labelled partial.
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
    time_limit: float | None = DEFAULT_TIME_LIMIT
    memory_limit: int | None = None          # None: traceconf.machine's default share
    classes: bool = True
    row_bytes: int = 128


class LimitReached(Exception):
    """The emulation ran into its time or memory limit; ``reason`` says which, in words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Limits:
    """The clock and memory budget of one emulation; ``check`` raises :class:`LimitReached`."""

    def __init__(self, time_limit: float | None, memory_limit: int | None):
        self.started = time.monotonic()
        self.time_limit = time_limit
        self.deadline = None if time_limit is None else self.started + float(time_limit)
        self.memory_limit = default_memory_limit(memory_limit)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def check(self, where: str = "") -> None:
        at = f" (at {where})" if where else ""
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
        if maximum and any(b > m for b, m in zip(block, _dims(maximum, ".maxntid", kernel))):
            raise InputError(f"kernel {kernel} allows at most .maxntid {tuple(maximum)} threads per dimension, "
                             f"but the launch block is {block}")
        return block, "--block"
    if required:
        return _dims(required, ".reqntid", kernel), ".reqntid"
    if kernel_row.get("maxntid"):
        return _dims(kernel_row["maxntid"], ".maxntid", kernel), ".maxntid"
    raise InputError(f"kernel {kernel} states neither .reqntid nor .maxntid: pass the launch with --block X[,Y[,Z]] "
                     "(and --grid, --param as the kernel needs)")


def resolve_block(launch: Launch, kernel_row: dict) -> tuple[int, int, int]:
    return block_and_origin(launch.block, kernel_row)[0]


def resolve_grid(launch: Launch, kernel_row: dict) -> tuple[int, int, int]:
    return _dims(launch.grid, "the grid", kernel_row["kernel"])


def data_parameter(key, kernel_row: dict) -> str:
    """The PTX name of the pointer parameter a ``--data`` key names; unknown keys are errors."""
    names = [p["name"] for p in kernel_row.get("params") or []]
    name = parameter_name(key, names, kernel_row["kernel"])
    if name is None:
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            raise InputError(f"kernel {kernel_row['kernel']} has {len(names)} parameter(s); "
                             f"--data index {key} does not exist")
        raise InputError(f"kernel {kernel_row['kernel']} has no parameter {key!r} (parameters: "
                         f"{', '.join(names) or 'none'}; an index 0..{len(names) - 1} also works)")
    return name


def resolve_data(launch: Launch, kernel_row: dict) -> dict:
    """Parameter name -> DataBuffer of ``--data``; the parameter must be a pointer-sized one."""
    found = {}
    for key, buffer in launch.data.items():
        name = data_parameter(key, kernel_row)
        row = next(p for p in kernel_row.get("params") or [] if p["name"] == name)
        if (row.get("bytes") or 8) not in (4, 8):
            raise InputError(f"--data {key}: parameter {name} of kernel {kernel_row['kernel']} is "
                             f"{row.get('bytes')} bytes, not a pointer")
        found[name] = buffer
    return found


def parameter_name(key: str | int, names: list[str], kernel: str) -> str | None:
    """The PTX parameter a ``--param`` key names, or None if the kernel has no such parameter.

    A key is a 0-based index, the PTX name, or the source name inside an old-nvcc PTX name
    (``matrix_dim`` for ``__cudaparm__Z12lud_diagonalPfii_matrix_dim``).
    """
    if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
        index = int(key)
        return names[index] if index < len(names) else None
    if key in names:
        return key
    prefixed = [n for n in names if n.startswith("__cudaparm_") and n.endswith(f"_{key}")]
    return prefixed[0] if len(prefixed) == 1 else None


def resolve_params(launch: Launch, kernel_row: dict, strict: bool = True) -> dict[str, int]:
    """Parameter name -> integer value, accepting names or indices.  ``strict``: a key the kernel does not
    have is an error; otherwise it is skipped (one ``--param`` list serves every kernel of a file)."""
    names = [p["name"] for p in kernel_row.get("params") or []]
    kernel = kernel_row["kernel"]
    values = {}
    for key, value in launch.params.items():
        name = parameter_name(key, names, kernel)
        if name is None:
            if not strict:
                continue
            listing = ", ".join(names) or "none"
            raise InputError(f"kernel {kernel} has no parameter {key!r} (parameters: {listing}; "
                             f"an index 0..{len(names) - 1} also works)" if names else
                             f"kernel {kernel} has no parameters; --param {key} does not apply")
        option = f"--param {key}"
        number = read_int(value, option) if isinstance(value, str) else int(value)
        row = next(p for p in kernel_row.get("params") or [] if p["name"] == name)
        bits = 8 * (row.get("bytes") or 8)
        # either reading of the bits: nvcc declares an int parameter .u32, and -1 is what it is given
        values[name] = check_int(number, option, what=f"value for {name} (.{row.get('type') or f'b{bits}'})",
                                 low=-(1 << (bits - 1)), high=(1 << bits) - 1)
    return values


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
