"""What the command-line process sets up before a command runs: pyarrow without pandas, and glibc's malloc
keeping the memory the emulator frees.

pyarrow imports pandas (0.2-0.35 CPU-s, a third of a one-kernel ``analyze``) the first time it converts
anything to or from Python or numpy (``pa.array``, ``pa.scalar``, ``Array.to_numpy``, a compute function
given a Python number), only to check whether the value is a pandas object; no traceconf command hands
pyarrow a pandas object.  pyarrow asks twice per process, once in Python (``pyarrow.lib._pandas_api``) and
once in C++ (``arrow::py::InitPandasStaticData``), and keeps the answer when pandas cannot be imported.  So
the command line, and only it, lets pyarrow's first conversion find no pandas: from then on pyarrow converts
as it does where pandas is not installed, an ``import pandas`` still imports it, and ``Table.to_pandas`` still
works.  A library user's process is left alone (the API returns pandas DataFrames and its users mix the
two); a process that calls :func:`traceconf.cli.main` itself gets the command line's set-up.  This relies on
that pyarrow behaviour; tests/test_startup.py fails if it changes.

The emulator makes and drops arrays of one batch's threads (128 KiB for 16,384 uint64 values) tens of times per
instruction.  glibc serves a request of 128 KiB and more with a fresh ``mmap`` at first, and afterwards returns
the top of its heap to the system whenever it grows past twice that: either way each such array is new pages,
faulted in and zeroed by the kernel (about 1 CPU-s of system time in a 13 CPU-s bitonicSortShared launch,
scripts/bench_targets.py).  Fixed thresholds (:data:`MALLOC_SETTINGS`) keep those arrays in the heap and the
freed memory in the process for the next one; the largest arrays (tables, buffers) still get their own mapping.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.util
import sys
from types import ModuleType

__all__ = ["malloc_keeps_freed_memory", "pyarrow_without_pandas"]

#: glibc ``mallopt`` parameters: M_MMAP_THRESHOLD (-3), requests from this size get their own mapping, and
#: M_TRIM_THRESHOLD (-1), free memory at the heap's top beyond which it is returned to the system: 256 MiB each,
#: above a batch's access log (at most 2**19 warp executions of 32 lanes, 128 MiB; 32 MiB thresholds leave half
#: of the system time), far below the memory a launch holds anyway (peak RSS unchanged).
MALLOC_SETTINGS = ((-3, 256 << 20), (-1, 256 << 20))


def malloc_keeps_freed_memory() -> bool:
    """Set :data:`MALLOC_SETTINGS` where the C library is glibc (True); elsewhere (no ``mallopt``) nothing."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all(mallopt(parameter, value) == 1 for parameter, value in MALLOC_SETTINGS)


def pyarrow_without_pandas() -> None:
    """Once pyarrow is imported (now, or when a command first imports it: ``--help`` does not), make its pandas
    checks find no pandas, unless pandas is already loaded (then they cost nothing)."""
    if "pyarrow" in sys.modules:
        _settle(sys.modules["pyarrow"])
    elif not any(isinstance(finder, _WhenPyarrowLoads) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WhenPyarrowLoads())


def _settle(pa: ModuleType) -> None:
    if "pandas" in sys.modules:
        return
    hide = _NoPandas()
    sys.meta_path.insert(0, hide)
    try:
        pa.array([0]).to_numpy()      # both of pyarrow's pandas checks run, find none and remember it
    finally:
        sys.meta_path.remove(hide)


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


class _WhenPyarrowLoads(importlib.abc.MetaPathFinder):
    """Finds pyarrow as the other finders do, with a loader that settles it (:func:`_settle`) once loaded."""

    def find_spec(self, name, path=None, target=None):
        if name != "pyarrow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenSettle(spec.loader)
        return spec


class _ThenSettle(importlib.abc.Loader):
    """pyarrow's own loader, then :func:`_settle` (anything else asked of the loader goes to pyarrow's)."""

    def __init__(self, loader: importlib.abc.Loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _settle(module)

    def __getattr__(self, name: str):
        return getattr(self.loader, name)
