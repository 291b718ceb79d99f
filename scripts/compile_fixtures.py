#!/usr/bin/env python3
"""Regenerate the PTX (and, with --sass, the SASS listings) of the CUDA fixtures.

For every ``tests/fixtures/cuda/NAME.cu`` this writes ``NAME.<arch>.ptx`` next to
it, one per target architecture the file supports, with::

    nvcc -ptx -lineinfo -arch=<arch> NAME.cu -o NAME.<arch>.ptx

``-lineinfo`` keeps ``.loc`` directives, so every PTX instruction maps back to a
CUDA source line. The targets are sm_90 (the measured GPU), sm_75 (the oldest
architecture CUDA 13 compiles for) and sm_52 (Maxwell). CUDA 13 dropped sm_52 and
the CUDA 11/12 compiler wheels on PyPI ship only ptxas, so sm_52 is compiled by an
older toolkit's nvcc: ``$LEGACY_NVCC``, by default ``/usr/bin/nvcc`` from Debian's
``nvidia-cuda-toolkit`` 11.8 (bookworm, component non-free). Files whose kernels
need newer instructions say so in ``MIN_ARCH``.

``--sass DIR`` also assembles each sm_90 PTX with ``ptxas -arch=sm_90 -lineinfo``
(the same PTX the hardware ran) and writes ``cuobjdump -sass`` of the cubin to
``DIR/NAME.sass``, so that tests can see where ptxas merged or removed shared
instructions. The absolute path nvcc writes into the ``.file`` directive of the
fixture is replaced by its bare name. ``--check`` compiles into a temporary directory and exits 1 if
any committed PTX differs from the compiler's output.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "cuda"
SASS_DIR = REPO / "tests" / "data" / "hw" / "sass"

ARCHS = ("sm_90", "sm_75", "sm_52")
#: Targets the current toolkit no longer compiles for, and the older nvcc that does.
LEGACY_ARCHS = {"sm_52"}
LEGACY_NVCC = os.environ.get("LEGACY_NVCC", "/usr/bin/nvcc")
#: Fixtures that use instructions absent from the older targets.
MIN_ARCH = {
    "cp_async.cu": "sm_80",   # cp.async
    "ldmatrix.cu": "sm_90",   # stmatrix
    "ldgsts.cu": "sm_80",     # cp.async
    # Added when the CUDA 11.8 nvcc was not installed on the build machine: no sm_52 PTX yet.
    "vectorize.cu": "sm_75",
    "atomics2.cu": "sm_75",
    "datadep.cu": "sm_75",
}


def arch_number(arch: str) -> int:
    return int(arch.split("_")[1])


def targets(source: Path) -> list[str]:
    """The architectures a fixture file is compiled for."""
    floor = arch_number(MIN_ARCH.get(source.name, "sm_50"))
    return [arch for arch in ARCHS if arch_number(arch) >= floor]


def run(command: list[str], cwd: Path | None = None) -> None:
    result = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")


def compile_ptx(source: Path, arch: str, out_dir: Path) -> Path:
    ptx = out_dir / f"{source.stem}.{arch}.ptx"
    nvcc = LEGACY_NVCC if arch in LEGACY_ARCHS else "nvcc"
    run([nvcc, "-ptx", "-lineinfo", f"-arch={arch}", source.name, "-o", str(ptx.resolve())], cwd=source.parent)
    # nvcc writes the source's absolute path into its .file directive; keep the
    # committed PTX independent of where the repository is checked out.
    ptx.write_text(ptx.read_text().replace(f'"{source.resolve()}"', f'"{source.name}"'))
    return ptx


def instructions(ptx: str) -> str:
    """PTX without its debug sections, whose inlined-function names embed nvcc's temporary file names."""
    return ptx.split(".section\t.debug_str")[0]


def write_sass(ptx: Path, sass_dir: Path, cuobjdump: str) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / f"{ptx.stem}.cubin"
        run(["ptxas", "-arch=sm_90", "-lineinfo", str(ptx), "-o", str(cubin)])
        listing = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True)
    sass = sass_dir / f"{ptx.name.split('.')[0]}.sass"
    # cuobjdump names the temporary cubin in its header; keep the listing machine-independent.
    sass.write_text(listing.stdout.replace(str(cubin), cubin.name))
    return sass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed PTX instead of writing")
    parser.add_argument("--sass", type=Path, nargs="?", const=SASS_DIR, default=None,
                        help=f"also write cuobjdump -sass listings of the sm_90 cubins (default dir {SASS_DIR})")
    parser.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    args = parser.parse_args()

    sources = sorted(FIXTURES.glob("*.cu"))
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) if args.check else FIXTURES
        for source in sources:
            for arch in targets(source):
                ptx = compile_ptx(source, arch, out_dir)
                if args.check and instructions(ptx.read_text()) != instructions((FIXTURES / ptx.name).read_text()):
                    stale.append(ptx.name)
                if arch == "sm_90" and args.sass is not None and not args.check:
                    args.sass.mkdir(parents=True, exist_ok=True)
                    write_sass(ptx, args.sass, args.cuobjdump)
    if stale:
        print("stale PTX (re-run scripts/compile_fixtures.py):", *stale, sep="\n  ")
        return 1
    print(f"{len(sources)} fixture files {'checked' if args.check else 'compiled'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
