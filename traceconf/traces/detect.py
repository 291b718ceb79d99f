"""Which format a trace file is in, decided by its content (magic bytes, header lines), not its name."""

from __future__ import annotations

import re
from pathlib import Path

from traceconf.errors import InputError
from traceconf.traces.source import head

FORMATS = ("accelsim", "nvbit", "gpgpusim_stats", "canonical_parquet", "canonical_csv", "ptx", "sass", "cuda_binary")

PARQUET_MAGIC = b"PAR1"
#: Columns a canonical CSV header must name (kernel and matrices are optional).
CSV_REQUIRED = ("cta", "warp", "execution", "instruction", "lane", "address", "bytes", "kind")

_NVBIT = re.compile(rb"^(MEMTRACE: CTX 0x[0-9a-fA-F]+ - |CTA \d+,\d+,\d+ - warp \d+ - |Kernel .* - grid size \d+,\d+,\d+ - )"
                    rb"|NVBit \(NVidia Binary Instrumentation Tool", re.M)
_KERNELSLIST = re.compile(rb"(Memcpy\w*,0x[0-9a-fA-F]+,\d+|kernel-\S*\.trace\S*)\s*")
_GPGPUSIM = re.compile(rb"kernel line : count latency dram_traffic smem_bk_conflicts")
_CUDA_SOURCE = re.compile(rb"__global__|__shared__|#include\s*[<\"]cuda", re.M)
_PTX = re.compile(rb"^\s*\.(version|target|address_size|entry|visible)\b", re.M)


def detect_format(path: str | Path) -> str:
    """One of :data:`FORMATS`; raises InputError for anything else.

    A directory is an Accel-Sim trace folder when it holds ``kernelslist.g``.
    """
    path = Path(path)
    if path.is_dir():
        if (path / "kernelslist.g").is_file():
            return "accelsim"
        raise InputError("folder has no kernelslist.g (expected an Accel-Sim trace folder)", str(path))
    if not path.is_file():
        raise InputError("no such file", str(path))
    with open(path, "rb") as raw:
        magic = raw.read(4)
    if magic == PARQUET_MAGIC:
        return "canonical_parquet"
    from traceconf.sass.listing import looks_like_sass
    from traceconf.sass.toolchain import is_cuda_binary
    if is_cuda_binary(magic):
        return "cuda_binary"
    text = head(path)
    body = text.lstrip()
    if not body:
        raise InputError("empty file: nothing to analyse", str(path), 1, 1)
    if body.startswith(b"-kernel name") or body.startswith(b"#BEGIN_TB"):
        return "accelsim"
    lines = [line.strip() for line in body.splitlines()[:20] if line.strip()]
    if lines and all(_KERNELSLIST.fullmatch(line) for line in lines):
        return "accelsim"
    if lines and _GPGPUSIM.match(lines[0]):
        return "gpgpusim_stats"
    if _NVBIT.search(text):
        return "nvbit"
    if lines and all(column in lines[0].decode("utf-8", "replace").replace(" ", "").replace('"', "").split(",")
                     for column in CSV_REQUIRED):
        return "canonical_csv"
    if looks_like_sass(text):   # before PTX: nvdisasm listings carry a .target line too
        return "sass"
    if _PTX.search(text):
        return "ptx"
    if _CUDA_SOURCE.search(text) or path.suffix.lower() in (".cu", ".cuh"):
        raise InputError("this is CUDA source, which traceconf does not compile: make PTX first, e.g. "
                         f"nvcc -ptx -arch=sm_90 -lineinfo {path.name} -o {path.stem}.ptx, and analyse that",
                         str(path))
    if path.suffix.lower() == ".ptx":
        raise InputError("not PTX: no .version, .target or .entry directive near the start of the file", str(path))
    raise InputError("unrecognised trace format (expected an Accel-Sim .traceg or kernelslist.g, an NVBit "
                     "mem_trace log, a GPGPU-Sim gpgpu_inst_stats.txt, or a canonical access table as "
                     "Parquet or CSV)", str(path))
