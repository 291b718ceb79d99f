"""Running external programs (ptxas, cuobjdump, nvdisasm, nvcc): the one way traceconf does it.

No shell (an argument list, so no file name is ever interpreted), a timeout, a private temporary folder as
the working directory, output captured, and every way it can go wrong — the program missing, not
executable, timing out, killed, or exiting non-zero — one :class:`ToolError` line that names the program and
says what to do, never a traceback:

>>> with tool_folder() as folder:
...     result = run_tool("ptxas", ["-arch=sm_90", str(ptx), "-o", str(folder / "k.cubin")], folder=folder)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Sequence

from traceconf.errors import InputError

#: Default seconds one tool run may take.
DEFAULT_TIMEOUT = 120.0
#: Where CUDA's tools are looked for after PATH and ``$CUDA_HOME``/``$CUDA_PATH``, before the pip wheels.
CUDA_BIN = Path("/usr/local/cuda/bin")
#: How to get each tool.
INSTALL_HINTS = {
    "ptxas": "install the CUDA toolkit or `pip install nvidia-cuda-nvcc` (or `pip install 'traceconf[sass]'`)",
    "cuobjdump": "install the CUDA toolkit or `pip install nvidia-cuda-cuobjdump` (or `pip install 'traceconf[sass]'`)",
    "nvdisasm": "install the CUDA toolkit or `pip install nvidia-cuda-nvdisasm` (or `pip install 'traceconf[sass]'`)",
    "nvcc": "install the CUDA toolkit (or `pip install nvidia-cuda-nvcc`)",
}
#: Characters of a tool's stderr kept in the one-line message.
MESSAGE_CHARS = 300


class ToolError(InputError):
    """An external program that is missing or failed (one line; exit status 2 like any bad input)."""


@dataclass
class ToolResult:
    program: str
    arguments: list[str]
    stdout: str
    stderr: str
    returncode: int = 0


def wheel_bin_dirs() -> list[Path]:
    """``site-packages/nvidia/*/bin`` of NVIDIA's pip wheels (cu12: nvidia/cuda_nvcc/bin; cu13: nvidia/cu13/bin)."""
    found = []
    for entry in sys.path:
        base = Path(entry) / "nvidia"
        if base.is_dir():
            found += sorted(p for p in base.glob("*/bin") if p.is_dir())
    return found


def search_dirs() -> list[Path]:
    """Where tools are looked for, in order: PATH, ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, /usr/local/cuda/bin,
    the pip wheels."""
    dirs = [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            dirs.append(Path(os.environ[variable]) / "bin")
    dirs.append(CUDA_BIN)
    return dirs + wheel_bin_dirs()


@lru_cache(maxsize=None)
def locate(name: str) -> str | None:
    """Absolute path of the tool ``name`` (first in :func:`search_dirs`), or None."""
    for directory in search_dirs():
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def find_tool(name: str) -> str:
    """The path of ``name``; a ToolError saying where it was looked for and how to get it when absent."""
    found = locate(name)
    if found is None:
        raise ToolError(f"{name} not found (searched PATH, $CUDA_HOME/bin, {CUDA_BIN} and the NVIDIA pip wheels): "
                        f"{INSTALL_HINTS.get(name, 'install it or put it on PATH')}")
    return found


@contextmanager
def tool_folder() -> Iterator[Path]:
    """A private temporary folder for a tool's outputs, removed afterwards whatever happens."""
    with tempfile.TemporaryDirectory(prefix="traceconf-tool-") as name:
        yield Path(name)


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " | ".join(lines[-3:])
    return joined[:MESSAGE_CHARS] + ("…" if len(joined) > MESSAGE_CHARS else "")


def run_tool(name: str, arguments: Sequence[str | os.PathLike], folder: Path | None = None,
             timeout: float = DEFAULT_TIMEOUT, program: str | None = None, file: str | None = None,
             check: bool = True) -> ToolResult:
    """Run ``name`` (or the path ``program``) with ``arguments`` — no shell, in ``folder`` (a fresh temporary
    folder when None), at most ``timeout`` seconds.  Any failure is a ToolError located at ``file`` if given;
    with ``check=False`` a non-zero exit status is the caller's to read (``returncode``, ``stderr``)."""
    executable = program or find_tool(name)
    argv = [executable, *map(os.fspath, arguments)]
    with (tool_folder() if folder is None else _existing(folder)) as cwd:
        try:
            completed = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, errors="replace",
                                       timeout=timeout, shell=False, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise ToolError(f"{name} not found ({executable}): {INSTALL_HINTS.get(name, 'install it')}",
                            file=file) from None
        except PermissionError:
            raise ToolError(f"{name} ({executable}) is not executable", file=file) from None
        except subprocess.TimeoutExpired:
            raise ToolError(f"{name} did not finish within {timeout:g} s (killed)", file=file) from None
        except OSError as error:
            raise ToolError(f"{name} could not be started: {error.strerror or error}", file=file) from None
    if completed.returncode != 0 and check:
        how = (f"was killed by signal {-completed.returncode}" if completed.returncode < 0
               else f"failed (exit status {completed.returncode})")
        detail = _one_line(completed.stderr) or _one_line(completed.stdout)
        raise ToolError(f"{name} {how}" + (f": {detail}" if detail else ""), file=file)
    return ToolResult(name, argv[1:], completed.stdout, completed.stderr, completed.returncode)


@contextmanager
def _existing(folder: Path) -> Iterator[Path]:
    yield folder
