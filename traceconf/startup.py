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

The cyclic garbage collector runs whenever allocations of container objects outnumber deallocations by its
first-generation threshold (700 by default).  Start-up creates tens of thousands of them (module dicts, functions,
classes: numpy, pyarrow, Typer, rich, the package) and frees almost none: the README transpose's ``analyze`` ran
the collector 119 times, 0.045 CPU-s (a tenth of the command) to free 1,021 objects, and ended with 73,000 such
objects more than it started with (``--help`` 36,000).  The command line raises the threshold above that
(:data:`FIRST_GENERATION_THRESHOLD`), so start-up runs no collection; a cycle of garbage waits for at most that
many further allocations.

pyarrow.compute writes, when imported, a docstring for each of its ~290 function wrappers, parsing the numpydoc
text of every options class (``pyarrow.vendored.docscrape``) to list its parameters: 0.03 of the 0.07 CPU-s
that import takes, in every command that touches a table (``Array.take`` imports it too).  The command line
reads no docstring, so it lets that import find options classes without documented parameters: the wrappers,
their signatures and their behaviour are pyarrow's own, their docstrings lack the options' parameter list
(:func:`pyarrow_compute_without_option_docs`; tests/test_startup.py fails if pyarrow's import changes).

numpy's OpenBLAS starts a thread per core when numpy is imported, and those threads spin waiting for work: 0.08 of
the 0.14 CPU-s ``import numpy`` costs on a 2-core machine (0.06 with one thread), again in every command, and
about 0.1 CPU-s of a bitonicSortShared launch.  traceconf gives BLAS no work (its one matrix product is of
integers, which numpy computes itself), so the command line asks OpenBLAS for one thread
(:func:`one_blas_thread`) unless the user chose a number (``OPENBLAS_NUM_THREADS`` set) or numpy is loaded.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.abc
import importlib.util
import os
import sys
from types import ModuleType

__all__ = ["fewer_collections", "malloc_keeps_freed_memory", "one_blas_thread",
           "pyarrow_compute_without_option_docs", "pyarrow_without_pandas"]

#: glibc ``mallopt`` parameters: M_MMAP_THRESHOLD (-3), requests from this size get their own mapping, and
#: M_TRIM_THRESHOLD (-1), free memory at the heap's top beyond which it is returned to the system: 256 MiB each,
#: above a batch's access log (at most 2**19 warp executions of 32 lanes, 128 MiB; 32 MiB thresholds leave half
#: of the system time), far below the memory a launch holds anyway (peak RSS unchanged).
MALLOC_SETTINGS = ((-3, 256 << 20), (-1, 256 << 20))


#: The command line's first-generation threshold of the cyclic garbage collector (CPython's default: 700).
FIRST_GENERATION_THRESHOLD = 100_000


def fewer_collections() -> None:
    """Raise the collector's first-generation threshold to :data:`FIRST_GENERATION_THRESHOLD` (the older
    generations' stay)."""
    first, *older = gc.get_threshold()
    gc.set_threshold(max(FIRST_GENERATION_THRESHOLD, first), *older)


def one_blas_thread() -> None:
    """Have numpy's OpenBLAS, when numpy is first imported, start no thread beside the main one (the variable is
    read then), unless the environment names a number already."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


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
    else:
        _when_loaded("pyarrow", _then_settle)


def pyarrow_compute_without_option_docs() -> None:
    """When pyarrow.compute is first imported, let it find no parameters in its options classes' documentation
    (the stand-in :data:`_UNDOCUMENTED` for the numpydoc parser it reads them with; removed once it is loaded)."""
    if "pyarrow.compute" not in sys.modules and DOCUMENTATION_PARSER not in sys.modules:
        _when_loaded("pyarrow.compute", _without_option_docs)


#: The module pyarrow.compute parses its options classes' docstrings with (its only user).
DOCUMENTATION_PARSER = "pyarrow.vendored.docscrape"


class _NoParameters(dict):
    """Stands for ``docscrape.NumpyDocString``: a docstring with no sections pyarrow.compute reads."""

    def __init__(self, _docstring):
        super().__init__(Parameters=[])


_UNDOCUMENTED = ModuleType(DOCUMENTATION_PARSER, "Stand-in for pyarrow's numpydoc parser (traceconf.startup).")
_UNDOCUMENTED.NumpyDocString = _NoParameters


def _then_settle(execute, module: ModuleType) -> None:
    execute(module)
    _settle(module)


def _without_option_docs(execute, module: ModuleType) -> None:
    if DOCUMENTATION_PARSER in sys.modules:       # imported meanwhile by someone else: leave it to them
        execute(module)
        return
    sys.modules[DOCUMENTATION_PARSER] = _UNDOCUMENTED
    try:
        execute(module)
    finally:
        if sys.modules.get(DOCUMENTATION_PARSER) is _UNDOCUMENTED:
            del sys.modules[DOCUMENTATION_PARSER]


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


def _when_loaded(name: str, around) -> None:
    """Have the module ``name``, when first imported, executed by ``around(execute, module)`` (``execute`` is its
    own loader's)."""
    if not any(isinstance(finder, _WhenLoaded) and finder.name == name for finder in sys.meta_path):
        sys.meta_path.insert(0, _WhenLoaded(name, around))


class _WhenLoaded(importlib.abc.MetaPathFinder):
    """Finds one module as the other finders do, with a loader that runs it through ``around``."""

    def __init__(self, name: str, around):
        self.name, self.around = name, around

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Around(spec.loader, self.around)
        return spec


class _Around(importlib.abc.Loader):
    """A module's own loader, its execution wrapped by ``around`` (anything else asked goes to its loader)."""

    def __init__(self, loader: importlib.abc.Loader, around):
        self.loader, self.around = loader, around

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.around(self.loader.exec_module, module)

    def __getattr__(self, name: str):
        return getattr(self.loader, name)
