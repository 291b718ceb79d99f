"""traceconf: where GPU kernels lose time to shared-memory bank conflicts, without a GPU."""

#: The one place the version is written (pyproject.toml reads it from here: importlib.metadata costs 0.1 s of
#: start-up).
__version__ = "0.1.0"

__all__ = ["InputError", "__version__", "analyze_ptx", "analyze_sass", "analyze_trace"]


def __getattr__(name: str):
    # Imported on first use: the CLI does not pay for pandas (traceconf.api), and ``--version`` for nothing.
    if name == "InputError":
        from traceconf.errors import InputError
        return InputError
    if name in ("analyze_ptx", "analyze_sass", "analyze_trace"):
        from traceconf import api
        return getattr(api, name)
    raise AttributeError(f"module 'traceconf' has no attribute {name!r}")
