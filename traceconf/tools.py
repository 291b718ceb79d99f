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
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from traceconf.errors import InputError

#: Default seconds one tool run may take.
DEFAULT_TIMEOUT = 120.0
#: Where CUDA's tools are looked for after PATH (``$CUDA_HOME/bin`` first when set).
CUDA_BIN = Path("/usr/local/cuda/bin")
#: How the tools that do not come with every CUDA install are installed.
INSTALL_HINTS = {
    "cuobjdump": "pip install nvidia-cuda-cuobjdump, or install the CUDA toolkit",
    "nvdisasm": "pip install nvidia-cuda-nvdisasm, or install the CUDA toolkit",
    "ptxas": "install the CUDA toolkit (or pip install nvidia-cuda-nvcc)",
    "nvcc": "install the CUDA toolkit (or pip install nvidia-cuda-nvcc)",
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


def find_tool(name: str) -> str:
    """The path of ``name``: PATH, then ``$CUDA_HOME/bin``, then /usr/local/cuda/bin; ToolError if absent."""
    found = shutil.which(name)
    if found:
        return found
    for folder in ([Path(os.environ["CUDA_HOME"]) / "bin"] if os.environ.get("CUDA_HOME") else []) + [CUDA_BIN]:
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    hint = INSTALL_HINTS.get(name, "install it or put it on PATH")
    raise ToolError(f"{name} not found on PATH or in {CUDA_BIN}: {hint}")


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
