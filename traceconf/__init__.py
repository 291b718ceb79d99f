"""traceconf: where GPU kernels lose time to shared-memory bank conflicts, without a GPU.

The Python API (one pandas DataFrame of per-instruction results, the table ``traceconf analyze -o
results.parquet`` writes):

* :func:`analyze_ptx` — a PTX file (or text), a launch, one or more devices;
* :func:`analyze_sass` — a SASS listing or a CUDA binary (cubin, fatbin, executable, shared library);
* :func:`analyze_trace` — an Accel-Sim, NVBit or canonical Parquet/CSV access trace;
* :class:`InputError` — what bad input raises (``FILE:LINE:COL: message``).

``help(traceconf.analyze_ptx)`` gives each one's arguments; the command line is ``traceconf --help``.
"""

#: The one place the version is written (pyproject.toml reads it from here: importlib.metadata costs 0.1 s of
#: start-up).
__version__ = "0.1.0"

_API = ("analyze_ptx", "analyze_sass", "analyze_trace")
__all__ = ["InputError", "__version__", *_API]


def __getattr__(name: str):
    # Imported on first use: the CLI does not pay for pandas (traceconf.api), and ``--version`` for nothing.
    if name == "InputError":
        from traceconf.errors import InputError
        return InputError
    if name in _API:
        from traceconf import api
        return getattr(api, name)
    raise AttributeError(f"module 'traceconf' has no attribute {name!r}")


def __dir__() -> list[str]:
    # help(traceconf) and tab completion list the lazy API too (PEP 562)
    return sorted(set(globals()) | set(__all__))
