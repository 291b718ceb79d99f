"""traceconf: where GPU kernels lose time to shared-memory bank conflicts, without a GPU."""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("traceconf")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"

from traceconf.errors import InputError  # noqa: E402

__all__ = ["InputError", "__version__"]
