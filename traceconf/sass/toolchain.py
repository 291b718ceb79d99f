"""Finding and running NVIDIA's tools: ptxas (PTX → cubin), cuobjdump and nvdisasm (cubin → SASS text).

Tools are found and run by :mod:`traceconf.tools` (search order: ``PATH``,
``$CUDA_HOME/bin`` and ``$CUDA_PATH/bin``, ``/usr/local/cuda/bin``, then the
``bin`` folders of the NVIDIA pip wheels ``nvidia-cuda-nvcc``,
``nvidia-cuda-cuobjdump``, ``nvidia-cuda-nvdisasm``, which
``pip install 'traceconf[sass]'`` installs; no shell, an argument list, a
timeout and a private temporary folder).  ptxas
output is cached per (PTX hash, architecture, options, ptxas version) in the
user cache folder (``$TRACECONF_CACHE`` or ``$XDG_CACHE_HOME/traceconf`` or
``~/.cache/traceconf``), and so is the disassembly of a binary (per binary hash and tool versions) and the
architectures ptxas targets (per ptxas version).  The versions are asked of the tools in every process: a
wrapper script or a changed toolkit behind the same path never gets another version's entries.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path

from traceconf.errors import InputError
from traceconf.sass.containers import ELF_MAGIC, FATBIN_MAGIC, check_container
from traceconf.tools import find_tool, locate

TIMEOUT_S = 120


_PTXAS_LOCATION = re.compile(r", line (\d+); (?:error|fatal)\s*:\s*(.*)")


def run_tool(name: str, arguments: list[str], what: str, cwd: str | None = None, file: str | None = None) -> str:
    """Run a tool, return its stdout; a failure is a one-line InputError with the tool's first error line
    (located at ``file``:LINE when the tool names an input line, as ptxas does)."""
    from traceconf.tools import run_tool as run   # no shell, argument list, timeout, private folder

    done = run(name, arguments, folder=Path(cwd) if cwd else None, timeout=TIMEOUT_S, program=find_tool(name),
               file=file, check=False)
    if done.returncode != 0:
        message = next((line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()),
                       f"exit status {done.returncode}")
        for argument in arguments:          # the private copy the tool read is the user's input, named as such
            if cwd and argument.startswith(str(cwd)):
                message = message.replace(argument, what)
        located = _PTXAS_LOCATION.search(message)
        if located and file:
            raise InputError(f"{name}: {located.group(2)}", file=file, line=int(located.group(1)))
        raise InputError(f"{name} failed on {what}: {message}", file=file)
    return done.stdout


@lru_cache(maxsize=None)
def tool_version(name: str) -> str:
    tool = locate(name)
    if tool is None:
        return ""
    from traceconf.tools import ToolError
    from traceconf.tools import run_tool as run   # the one way to run a program (no shell, timeout, own folder)

    try:
        out = run(name, ["--version"], timeout=30, program=tool, check=False).stdout
    except ToolError:
        return ""
    match = re.search(r"V(\d+\.\d+\.\d+)", out)
    return match.group(1) if match else out.strip().splitlines()[-1] if out.strip() else ""


def ptxas_targets() -> set[str]:
    """Architectures the found ptxas accepts (those its ``--help`` names; none when it cannot say).

    Kept in the cache folder per ptxas version, which :func:`tool_version` reads anew in every process (the
    key of the cubins too): ``--help`` is a second start of ptxas, often behind a wrapper script."""
    version = tool_version("ptxas")
    cached = cache_dir() / "ptxas" / f"targets-{hashlib.sha256(version.encode()).hexdigest()}.txt"
    if version and cached.is_file():
        return set(cached.read_text().split())
    try:
        out = run_tool("ptxas", ["--help"], "--help")
    except InputError:
        return set()
    targets = set(re.findall(r"sm_\d+[a-z]?", out))
    if version and targets:
        store_cached(cached, " ".join(sorted(targets)).encode())
    return targets


def cache_dir() -> Path:
    if os.environ.get("TRACECONF_CACHE"):
        return Path(os.environ["TRACECONF_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "traceconf"


def assemble(ptx: bytes, arch: str, options: list[str] | tuple[str, ...] = (), what: str = "the PTX") -> bytes:
    """PTX → cubin with ``ptxas -arch=ARCH -lineinfo OPTIONS``; cached per (PTX hash, arch, options, version)."""
    options = list(options)
    key = hashlib.sha256(b"\0".join([ptx, arch.encode(), *(o.encode() for o in options),
                                     tool_version("ptxas").encode()])).hexdigest()
    cached = cache_dir() / "ptxas" / f"{key}.cubin"
    if cached.is_file():
        return cached.read_bytes()
    with tempfile.TemporaryDirectory(prefix="traceconf-") as work:
        source, output = Path(work) / "input.ptx", Path(work) / "output.cubin"
        source.write_bytes(ptx)
        command = [f"-arch={arch}", "-lineinfo", str(source), "-o", str(output)]
        try:
            run_tool("ptxas", command[:2] + options + command[2:], what, cwd=work, file=what)
        except InputError as error:
            # an unlocated failure that goes away without the options is the options' fault: name them
            if not options or error.line is not None:
                raise
            try:
                run_tool("ptxas", command, what, cwd=work, file=what)
            except InputError:
                raise error from None
            reason = error.message.removeprefix(f"ptxas failed on {what}: ")
            raise InputError(f"ptxas rejects {' '.join(options)}: {reason}", file="--ptxas-option") from None
        cubin = output.read_bytes()
    store_cached(cached, cubin)
    return cubin


def disassemble(binary: bytes, what: str) -> tuple[str, str]:
    """(SASS listing with line info, ``cuobjdump -elf`` text) of a cubin, fatbin or host binary.

    A cubin goes to ``nvdisasm -g -gp -c`` (CUDA and PTX line info per instruction); the cubins embedded in a
    fatbin, executable or shared library are extracted (``cuobjdump -xelf all``) and go the same way, so
    their line info is kept (``cuobjdump -sass`` prints none; it is the fallback without nvdisasm).
    Cached per (binary hash, tool versions): the tools take about a second to start.
    """
    check_container(binary, what)         # damaged tables are named here, before a tool starts
    key = hashlib.sha256(b"\0".join([binary, tool_version("nvdisasm").encode(), tool_version("cuobjdump").encode(),
                                      b"disassemble-2"])).hexdigest()
    cached = cache_dir() / "disassembly" / key
    listing_file, elf_file = cached.with_suffix(".sass"), cached.with_suffix(".elf")
    if listing_file.is_file() and elf_file.is_file():
        return listing_file.read_text(), elf_file.read_text()
    listing, elf = _disassemble(binary, what)
    store_cached(listing_file, listing.encode())
    store_cached(elf_file, elf.encode())
    return listing, elf


def store_cached(path: Path, data: bytes) -> None:
    """Write a cache entry atomically (a temporary file, then a rename); a read-only cache only costs speed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
        temporary.write_bytes(data)
        temporary.replace(path)
    except OSError:
        pass  # a read-only cache folder only costs speed


def _disassemble(binary: bytes, what: str) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="traceconf-") as work:
        path = Path(work) / "input.bin"
        path.write_bytes(binary)
        elf = run_tool("cuobjdump", ["-elf", str(path)], what, cwd=work, file=what) if locate("cuobjdump") else ""
        if is_cubin(binary) and locate("nvdisasm"):
            listing = _nvdisasm(path, what, work)
        elif locate("nvdisasm") and (cubins := _embedded_cubins(path, what)):
            listing = "".join(f"\narch = {arch}\n" + _nvdisasm(cubin, what, work) for arch, cubin in cubins)
        else:
            listing = run_tool("cuobjdump", ["-sass", str(path)], what, cwd=work, file=what)
    return listing, elf


def _nvdisasm(cubin: Path, what: str, work: str) -> str:
    """``nvdisasm -g -gp -c`` of one cubin.  Its dataflow pass (a quarter of its time) only adds the targets of
    transfers through a jump table or the pre-Volta branch stack (``BRX``, ``SYNC``...): it runs only for a
    listing holding one (or a warning), so the listing is the same as with the pass, for less."""
    listing = run_tool("nvdisasm", ["-g", "-gp", "-c", "-ndf", str(cubin)], what, cwd=work, file=what)
    if _dataflow_transfers().search(listing) or "nvdisasm warning" in listing:
        listing = run_tool("nvdisasm", ["-g", "-gp", "-c", str(cubin)], what, cwd=work, file=what)
    return listing


@lru_cache(maxsize=1)
def _dataflow_transfers() -> re.Pattern:
    """An instruction (after its ``/*pc*/`` and guard) whose targets nvdisasm's dataflow pass finds (the opcode
    table is read here, not when the module is imported)."""
    from traceconf.sass.opcodes import mnemonics
    return re.compile(r"\*/\s+(?:@!?\w+\s+)?(?:" + "|".join(
        mnemonics("control", "indirect") + mnemonics("control", "reconverge")) + r")\b")


_CUBIN_ARCH = re.compile(r"\.(sm_\d+[a-z]?)\.cubin$")


def _embedded_cubins(path: Path, what: str) -> list[tuple[str, Path]]:
    """(architecture, file) of each cubin a fatbin / host binary embeds, extracted next to ``path`` (a
    binary may hold one cubin twice: the same name is extracted once)."""
    folder = path.parent / "embedded"
    folder.mkdir()
    run_tool("cuobjdump", ["-xelf", "all", str(path)], what, cwd=str(folder))
    found = [(_CUBIN_ARCH.search(cubin.name), cubin) for cubin in sorted(folder.glob("*.cubin"))]
    return [(match.group(1), cubin) for match, cubin in found if match]


EM_CUDA = 190


def is_cubin(data: bytes) -> bool:
    """An ELF whose machine is EM_CUDA (190): a CUDA device binary (cubin)."""
    return data[:4] == ELF_MAGIC and len(data) > 20 and int.from_bytes(data[18:20], "little") == EM_CUDA


def is_cuda_binary(head: bytes) -> bool:
    """A cubin, a fatbin, or an ELF host binary (executable / shared library) that may embed cubins."""
    return head[:4] == ELF_MAGIC or head[:4] in FATBIN_MAGIC
