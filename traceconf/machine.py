"""What this machine has and what this process holds: the numbers every memory limit is checked against."""

from __future__ import annotations

import os

#: Without --memory-limit, a run stops cleanly before holding more than this share of physical memory.
DEFAULT_MEMORY_SHARE = 0.5


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def available_memory() -> int:
    """MemAvailable of /proc/meminfo (what new processes can get without swapping), else physical memory."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return physical_memory()


def memory_limit(given: int | None) -> int:
    """The memory limit of a run: ``--memory-limit`` where given, else the default share."""
    return int(given) if given is not None else int(physical_memory() * DEFAULT_MEMORY_SHARE)


def resident_bytes() -> int:
    """Resident memory of this process now (not the peak)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
