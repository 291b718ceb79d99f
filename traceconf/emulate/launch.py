"""Launch configuration of one emulated kernel, and its checks against the kernel's declaration."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from traceconf.errors import InputError

#: Default wall-clock budget of one kernel's emulation, seconds (a runaway stops cleanly, partial).
DEFAULT_TIME_LIMIT = 30.0
#: Default share of the machine's physical memory one analysis may hold.
DEFAULT_MEMORY_SHARE = 0.5


@dataclass
class Launch:
    """How the kernel is launched.

    ``params`` maps a parameter name (as spelled in the PTX) or its 0-based
    index (int or digit string) to an integer value; wider parameters (structs)
    take the little-endian bytes of the integer.  ``ctas`` limits a launch whose
    shared accesses depend on the CTA index to that many CTAs, spread evenly
    over the grid (a stated sample).  ``block`` may be None when the kernel
    declares ``.reqntid``.  ``time_limit`` (seconds) and ``memory_limit`` (bytes of resident
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
    time_limit: float | None = DEFAULT_TIME_LIMIT
    memory_limit: int | None = None          # None: DEFAULT_MEMORY_SHARE of physical memory
    classes: bool = True
    row_bytes: int = 128


class LimitReached(Exception):
    """The emulation ran into its time or memory limit; ``reason`` says which, in words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def resident_bytes() -> int:
    """Resident memory of this process now (not the peak)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Limits:
    """The clock and memory budget of one emulation; ``check`` raises :class:`LimitReached`."""

    def __init__(self, time_limit: float | None, memory_limit: int | None):
        self.started = time.monotonic()
        self.time_limit = time_limit
        self.deadline = None if time_limit is None else self.started + float(time_limit)
        self.memory_limit = int(memory_limit) if memory_limit is not None else \
            int(physical_memory() * DEFAULT_MEMORY_SHARE)

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


def resolve_block(launch: Launch, kernel_row: dict) -> tuple[int, int, int]:
    kernel = kernel_row["kernel"]
    if launch.block is not None:
        block = _dims(launch.block, "the block", kernel)
        required = kernel_row.get("reqntid")
        if required and _dims(required, ".reqntid", kernel) != block:
            raise InputError(f"kernel {kernel} requires .reqntid {tuple(required)} but the launch block is {block}")
        return block
    if kernel_row.get("reqntid"):
        return _dims(kernel_row["reqntid"], ".reqntid", kernel)
    raise InputError(f"kernel {kernel} has no .reqntid: pass the block size with --block X[,Y[,Z]]")


def resolve_grid(launch: Launch, kernel_row: dict) -> tuple[int, int, int]:
    return _dims(launch.grid, "the grid", kernel_row["kernel"])


def resolve_params(launch: Launch, kernel_row: dict) -> dict[str, int]:
    """Parameter name -> integer value, accepting names or indices; unknown keys are errors."""
    names = [p["name"] for p in kernel_row.get("params") or []]
    values = {}
    for key, value in launch.params.items():
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            index = int(key)
            if index >= len(names):
                raise InputError(f"kernel {kernel_row['kernel']} has {len(names)} parameter(s); "
                                 f"--param index {index} does not exist")
            name = names[index]
        elif key in names:
            name = key
        else:
            listing = ", ".join(names) or "none"
            raise InputError(f"kernel {kernel_row['kernel']} has no parameter {key!r} (parameters: {listing}; "
                             f"an index 0..{len(names) - 1} also works)")
        try:
            values[name] = int(value, 0) if isinstance(value, str) else int(value)
        except ValueError:
            raise InputError(f"--param {key}={value!r}: the value must be an integer") from None
    return values
