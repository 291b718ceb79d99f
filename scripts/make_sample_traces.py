#!/usr/bin/env python3
"""Write the project's own sample traces (traces/) from access patterns whose conflicts are known.

Every sample encodes the same per-lane shared addresses, so a reader must give
back exactly :func:`expected_accesses`.  Run ``python3 scripts/make_sample_traces.py``
(optionally with an output folder) to regenerate; tests/test_traces_samples.py
checks that the committed files match this script.

Patterns (per warp, 4-byte banks, 32 banks; ``wavefronts`` = what sm_90 needs, from
/work/shared/reference/bank_rules.md):

==========  ===============  ===================================  ==========  =====
PC          opcode           lane address                          wavefronts  ideal
==========  ===============  ===================================  ==========  =====
0x0010      STS              4*lane                                1           1
0x0020      LDS              8*lane (2 lanes per bank)             2           1
0x0030      LDS.U.32         128*lane (one bank)                   32          1
0x0040      LDS              0x40 for all lanes (broadcast)        1           1
0x0050      LDS.128          16*lane                               4           4
0x0060      LDS.U8           lane                                  1           1
0x0070      LDS (lanes 0-15) 64*lane                               8           1
0x0080      LDSM.16.M88.4    16*lane (32 contiguous rows)          4           4
0x0090      STS.64           8*lane                                2           2
0x00a0      LDS (scattered)  4*lane for lanes of mask 0x6190a142   1           1
0x00b0      ST.E (generic)   shmem_base + 4*lane                   1           1
0x00c0      LDS, mask 0      (predicated off: no access)           -           -
==========  ===============  ===================================  ==========  =====

Warp ``w`` of CTA ``c`` adds ``1024*(2*c + w)`` to every address: a multiple of
128 bytes, so the bank pattern is the same in every warp.
"""

from __future__ import annotations

import lzma
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.schemas import KIND_CODES

KERNEL = "_Z13bank_patternsPf"
GRID = (2, 1, 1)
BLOCK = (64, 1, 1)
WARPS = 2
SHMEM_BASE = 0x00007F3A5C000000
LOCAL_BASE = 0x00007F3A5A000000
GLOBAL = 0x00007F3A7D400000
LANES = np.arange(32)
FULL = 0xFFFFFFFF


@dataclass(frozen=True)
class Pattern:
    pc: int
    opcode: str
    kind: str
    bytes: int
    matrices: int
    mask: int
    offsets: tuple  # byte offset per lane (only active lanes matter)
    wavefronts: int | None  # sm_90, per warp; None where not stated
    ideal: int | None
    generic: bool = False
    dest: str = "R4"
    width: int = 4  # Accel-Sim mem_width column


PATTERNS = (
    Pattern(0x10, "STS", "st", 4, 0, FULL, tuple(4 * LANES), 1, 1, dest=""),
    Pattern(0x20, "LDS", "ld", 4, 0, FULL, tuple(8 * LANES), 2, 1),
    Pattern(0x30, "LDS.U.32", "ld", 4, 0, FULL, tuple(128 * LANES), 32, 1),
    Pattern(0x40, "LDS", "ld", 4, 0, FULL, (0x40,) * 32, 1, 1),
    Pattern(0x50, "LDS.128", "ld", 16, 0, FULL, tuple(16 * LANES), 4, 4, width=16),
    Pattern(0x60, "LDS.U8", "ld", 1, 0, FULL, tuple(LANES), 1, 1, width=1),
    Pattern(0x70, "LDS", "ld", 4, 0, 0x0000FFFF, tuple(64 * LANES), 8, 1),
    Pattern(0x80, "LDSM.16.M88.4", "ldmatrix", 16, 4, FULL, tuple(16 * LANES), 4, 4, width=2),
    Pattern(0x90, "STS.64", "st", 8, 0, FULL, tuple(8 * LANES), 2, 2, dest="", width=8),
    Pattern(0xA0, "LDS", "ld", 4, 0, 0x6190A142, tuple(4 * LANES), 1, 1),
    Pattern(0xB0, "ST.E", "st", 4, 0, FULL, tuple(4 * LANES), 1, 1, generic=True, dest=""),
    Pattern(0xC0, "LDS", "ld", 4, 0, 0, tuple(4 * LANES), None, None),
)

# Non-shared lines the readers must skip: (pc, opcode, dest, srcs, width, addresses or None).
OTHER_LINES = {
    0x08: ("S2R", "R0", ["R255"], 0, None),
    0x18: ("LDG.E", "R6", ["R2"], 4, lambda lanes: GLOBAL + 4 * lanes),
    0x28: ("STL", "", ["R1", "R6"], 4, lambda lanes: 0xFFFBD0 + 0 * lanes),
    0x38: ("BAR.SYNC", "", [], 0, None),
    0x48: ("IMAD.MOV.U32", "R7", ["R255", "R255"], 0, None),
}


def lane_addresses(pattern: Pattern, cta: int, warp: int) -> np.ndarray:
    """The 32 shared-window offsets of one warp's execution, INACTIVE where the lane is off."""
    active = (pattern.mask >> LANES) & 1
    offsets = np.asarray(pattern.offsets, dtype=np.int64) + 1024 * (2 * cta + warp)
    return np.where(active == 1, offsets, INACTIVE)


def program():
    """(pc, pattern or other-line) in the order each warp executes them."""
    others = sorted(OTHER_LINES.items())
    for pattern in PATTERNS:
        while others and others[0][0] < pattern.pc:
            yield others.pop(0)
        yield pattern.pc, pattern
    yield from others


def expected_accesses(kernel: str = KERNEL, generic: bool = True) -> WarpAccesses:
    """What every sample must read back as: one execution per (CTA, warp, active shared pattern).

    ``generic=False`` leaves out the generic ST, which a trace without a shared base address (pre-v3)
    cannot place in shared memory.
    """
    rows = [(cta, warp, p) for cta in range(GRID[0]) for warp in range(WARPS)
            for _, p in program() if isinstance(p, Pattern) and p.mask and (generic or not p.generic)]
    return WarpAccesses(
        kernel,
        np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.int32),
        np.arange(len(rows), dtype=np.int64), np.array([r[2].pc for r in rows], dtype=np.int32),
        np.array([KIND_CODES[r[2].kind] for r in rows], dtype=np.int8),
        np.array([r[2].bytes for r in rows], dtype=np.int16), np.array([r[2].matrices for r in rows], dtype=np.int8),
        np.array([lane_addresses(r[2], r[0], r[1]) for r in rows], dtype=np.int64).reshape(len(rows), 32))


# ----------------------------------------------------------------------------- Accel-Sim
def _compress(addresses: list[int], mask: int, version: int, compress: bool) -> str:
    """The address block as NVBit's Accel-Sim tracer writes it (tracer_tool.cu)."""
    active = [lane for lane in range(32) if mask >> lane & 1]
    wide = version < 3  # old tracers printed 0x%016lx
    hexa = (lambda a: f"0x{a:016x}") if wide else (lambda a: f"0x{a:x}")
    values = [addresses[lane] for lane in active]
    contiguous = len(active) >= 2 and active == list(range(active[0], active[0] + len(active)))
    strides = {b - a for a, b in zip(values, values[1:])}
    if compress and contiguous and len(strides) == 1:
        return f"1 {hexa(values[0])} {strides.pop()}"
    if compress and version >= 3:
        base = values[0] if values else 0
        return " ".join([f"2 {hexa(base)}"] + [str(b - a) for a, b in zip(values, values[1:])])
    return " ".join(["0"] + [f"0x{v:016x}" for v in values])


def _header(version: int | None, lineinfo: bool, kernel_id: int) -> str:
    lines = [f"-kernel name = {KERNEL}", f"-kernel id = {kernel_id}", f"-grid dim = ({GRID[0]},{GRID[1]},{GRID[2]})",
             f"-block dim = ({BLOCK[0]},{BLOCK[1]},{BLOCK[2]})", "-shmem = 16384", "-nregs = 32",
             "-binary version = 90", "-cuda stream id = 0"]
    if version is not None:
        lines += [f"-shmem base_addr = 0x{SHMEM_BASE:016x}", f"-local mem base_addr = 0x{LOCAL_BASE:016x}",
                  "-nvbit version = 1.7.4", f"-accelsim tracer version = {version}"]
    if version is not None and version >= 4:
        lines.append(f"-enable lineinfo = {int(lineinfo)}")
    fmt = ("threadblock_x threadblock_y threadblock_z warpid_tb PC mask dest_num reg_dests opcode src_num "
           "reg_srcs mem_width mem_addresses") if (version or 0) < 3 else (
        "[line_num] PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width [adrrescompress?] "
        "[mem_addresses] immediate")
    return "\n".join(lines) + f"\n\n#traces format = {fmt}\n\n"


def traceg(version: int | None, lineinfo: bool = False, compress: bool = True, immediates: int = 0,
           values: bool = False, clusters: bool = False, kernel_id: int = 1) -> str:
    """A whole .traceg for the sample kernel; ``version=None`` is a pre-v3 file without a version line."""
    v = version or 0
    out = [_header(version, lineinfo, kernel_id)]
    for cta in range(GRID[0]):
        out.append(f"#BEGIN_TB\n\nthread block = {cta},0,0\n")
        if clusters:
            out.append(f"cluster id = {cta},0,0\ncluster cta = 0,0,0\ncluster rank = 0\n")
        for warp in range(WARPS):
            lines = []
            for pc, item in program():
                prefix = f"{cta} 0 0 {warp} " if v < 3 else ""
                if lineinfo:
                    prefix += f"{100 + pc // 16} "
                if isinstance(item, Pattern):
                    mask, opcode, dest = item.mask, item.opcode, item.dest
                    srcs = ["R2"] if dest else ["R2", "R5"]
                    window = SHMEM_BASE if item.generic else 0
                    addresses = [int(a) + window for a in lane_addresses(item, cta, warp)]
                    width = item.width
                else:
                    opcode, dest, srcs, width, make = item
                    mask = FULL
                    addresses = [int(a) for a in make(LANES)] if make else None
                dests = f"1 {dest}" if dest else "0"
                line = f"{prefix}{pc:04x} {mask:08x} {dests} {opcode} {len(srcs)} {' '.join(srcs)}".rstrip()
                line += f" {width}"
                if width:
                    line += " " + _compress(addresses, mask, v, compress)
                line += "".join(f" {i}" for i in range(immediates))
                if values:
                    line += " Val 1 0x0 1 0x10" if dest else " NoVal"
                lines.append(line)
            out.append(f"\nwarp = {warp}\ninsts = {len(lines)}\n" + "\n".join(lines) + "\n")
        out.append("\n#END_TB\n\n")
    return "".join(out)


#: name -> keyword arguments of :func:`traceg`; one file per trace version in the wild.
TRACEG_VARIANTS = {
    "accelsim-prev3": dict(version=None, compress=True),
    "accelsim-v3": dict(version=3),
    "accelsim-v4-lineinfo": dict(version=4, lineinfo=True),
    "accelsim-v4-immediate": dict(version=4, immediates=1),
    "accelsim-v4-mode0": dict(version=4, compress=False),
    "accelsim-v5-clusters": dict(version=5, immediates=2, clusters=True),
    "accelsim-v6-values": dict(version=6, immediates=2, values=True),
}


# ----------------------------------------------------------------------------- Accel-Sim 2.0 .tracez
def tracez(text: str, subchunk_insts: int = 2048, dictionary: bool = True) -> bytes:
    """A .traceg (v3+) re-laid out as Accel-Sim 2.0's post-traces-processing writes a .tracez.

    Layout as in accel-sim-framework's tracez_format.h / write_tracez (see traceconf/traces/tracez.py):
    header text + NUL, u32 dict_size, u32 subchunk_insts, the dictionary (trained on every 8th line,
    up to 1 MiB; none when training fails, as the writer does), per warp u32 inst_count, u32
    num_subchunks and per sub-chunk u32 size + a level-3 zstd frame of the lines joined by newlines,
    then the index and the u64 index offset.  Sub-chunks hold ``subchunk_insts`` lines (0: the whole warp).
    """
    import struct

    import zstandard

    lines = text.split("\n")
    begin = lines.index("#BEGIN_TB")
    header = "".join(line + "\n" for line in lines[:begin])
    ctas, cta, warp = [], None, None
    for line in lines[begin:]:
        if line.startswith("thread block = "):
            cta = {"tb": [int(v) for v in line.split("=")[1].split(",")], "cluster_id": [0, 0, 0],
                   "cluster_cta": [0, 0, 0], "cluster_rank": 0, "warps": []}
            ctas.append(cta)
        elif line.startswith("cluster id = ") or line.startswith("cluster cta = "):
            cta["cluster_id" if "id" in line else "cluster_cta"] = [int(v) for v in line.split("=")[1].split(",")]
        elif line.startswith("cluster rank = "):
            cta["cluster_rank"] = int(line.split("=")[1])
        elif line.startswith("warp = "):
            warp = []
            cta["warps"].append(warp)
        elif line and not line.startswith("#") and not line.startswith("insts = "):
            warp.append(line)
    samples = [w[k] for c in ctas for w in c["warps"] for k in range(0, len(w), 8)]
    trained = b""
    if dictionary and samples:
        try:
            trained = zstandard.train_dictionary(64 * 1024, [s.encode() for s in samples]).as_bytes()
        except zstandard.ZstdError:  # too few samples: the writer then goes on without a dictionary
            trained = b""
    compressor = zstandard.ZstdCompressor(
        level=3, dict_data=zstandard.ZstdCompressionDict(trained) if trained else None, write_content_size=True)
    out = bytearray(header.encode() + b"\0" + struct.pack("<II", len(trained), subchunk_insts) + trained)
    index = bytearray(struct.pack("<I", len(ctas)))
    for c in ctas:
        index += struct.pack("<11I", *c["tb"], *c["cluster_id"], *c["cluster_cta"], c["cluster_rank"], len(c["warps"]))
        for w in c["warps"]:
            step = subchunk_insts or max(len(w), 1)
            pieces = [w[k:k + step] for k in range(0, len(w), step)]
            index += struct.pack("<IIQ", len(w), len(pieces), len(out)) + b"".join(
                struct.pack("<I", len(piece)) for piece in pieces)
            out += struct.pack("<II", len(w), len(pieces))
            for piece in pieces:
                frame = compressor.compress("\n".join(piece).encode())
                out += struct.pack("<I", len(frame)) + frame
    offset = len(out)
    return bytes(out + index + struct.pack("<Q", offset))


#: name -> (keyword arguments of :func:`traceg`, of :func:`tracez`)
TRACEZ_VARIANTS = {
    "accelsim-v6-values": (dict(version=6, immediates=2, values=True, clusters=True), dict(subchunk_insts=5)),
    "accelsim-v5-lineinfo": (dict(version=5, lineinfo=True), dict(subchunk_insts=0, dictionary=False)),
}


# ----------------------------------------------------------------------------- NVBit mem_trace
def nvbit_log(old: bool = False) -> str:
    """A mem_trace log of the sample kernel (full-warp patterns only: the log records no mask)."""
    ctx = "0x00005581a7c3e2b0"
    out = ["------------- NVBit (NVidia Binary Instrumentation Tool v1.5.5) Loaded --------------",
           "application output line"]
    if old:
        out.append(f"Kernel {KERNEL} - grid size {GRID[0]},{GRID[1]},{GRID[2]} - block size "
                   f"{BLOCK[0]},{BLOCK[1]},{BLOCK[2]} - nregs 32 - shmem 16384 - cuda stream id 0")
    else:
        out.append(f"MEMTRACE: CTX {ctx} - LAUNCH - Kernel pc 0x00007f3a80a00f00 - Kernel name {KERNEL} - "
                   f"grid launch id 1 - grid size {GRID[0]},{GRID[1]},{GRID[2]} - block size "
                   f"{BLOCK[0]},{BLOCK[1]},{BLOCK[2]} - nregs 32 - shmem 16384 - cuda stream id 0")
    for cta in range(GRID[0]):
        for warp in range(WARPS):
            for pc, item in program():
                if isinstance(item, Pattern):
                    if item.mask != FULL or item.generic:
                        continue
                    opcode, addresses = item.opcode, lane_addresses(item, cta, warp) + SHMEM_BASE
                elif item[4] is not None:
                    opcode, addresses = item[0], item[4](LANES)
                else:
                    continue
                head = "" if old else f"MEMTRACE: CTX {ctx} - grid_launch_id 0 - "
                out.append(f"{head}CTA {cta},0,0 - warp {warp} - {opcode} - "
                           + " ".join(f"0x{int(a):016x}" for a in addresses) + " ")
    return "\n".join(out) + "\n"


def nvbit_expected() -> WarpAccesses:
    expected = expected_accesses()
    full = np.array([p.pc for p in PATTERNS if p.mask == FULL and not p.generic])
    rows = np.flatnonzero(np.isin(expected.instruction, full))
    picked = expected.take(rows)
    order = {pc: i for i, pc in enumerate(dict.fromkeys(picked.instruction.tolist()))}  # first appearance
    opcode_of = {p.pc: p.opcode for p in PATTERNS}
    by_opcode = {}
    for pc in order:
        by_opcode.setdefault(opcode_of[pc], len(by_opcode))
    picked.instruction = np.array([by_opcode[opcode_of[pc]] for pc in picked.instruction.tolist()], dtype=np.int32)
    picked.execution = np.arange(len(rows), dtype=np.int64)
    return picked


# ----------------------------------------------------------------------------- GPGPU-Sim
def gpgpusim_ways(offsets: np.ndarray, banks: int = 32) -> int:
    """GPGPU-Sim's n-way degree: the most distinct 4-byte words mapped to one bank (first byte per lane)."""
    words = np.unique(offsets[offsets != INACTIVE] // 4)
    return int(np.bincount(words % banks, minlength=banks).max()) if len(words) else 0


def gpgpusim_stats() -> str:
    """A gpgpu_inst_stats.txt as GPGPU-Sim would write it for the sample patterns (one PTX line each)."""
    rows = ["kernel line : count latency dram_traffic smem_bk_conflicts smem_warp gmem_access_generated "
            "gmem_warp exposed_latency warp_divergence"]
    for number, pattern in enumerate(PATTERNS, start=40):
        if not pattern.mask:
            continue
        warps = GRID[0] * WARPS
        ways = sum(gpgpusim_ways(lane_addresses(pattern, c, w)) for c in range(GRID[0]) for w in range(WARPS))
        threads = bin(pattern.mask).count("1") * warps
        rows.append(f"_1.ptx {number} : {threads} {12 * warps} 0 {ways} {warps} 0 0 0 0 ")
    return "\n".join(rows) + "\n"


# ----------------------------------------------------------------------------- all samples
def write_samples(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []

    def put(name: str, data: str | bytes) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        written.append(path)

    for name, options in TRACEG_VARIANTS.items():
        put(f"{name}.traceg", traceg(**options))
    # a kernelslist with two launches of the kernel, the second xz-compressed (as TRACE_FILE_COMPRESS=1 writes)
    put("accelsim-kernelslist/kernelslist.g",
        "MemcpyHtoD,0x00007f3a7d400000,4096\nkernel-1.traceg\nMemcpyHtoD,0x00007f3a7d401000,4096\n"
        "kernel-2.traceg.xz\n")
    put("accelsim-kernelslist/kernel-1.traceg", traceg(version=5, immediates=1))
    put("accelsim-kernelslist/kernel-2.traceg.xz",
        lzma.compress(traceg(version=5, immediates=1, kernel_id=2).encode(), preset=1))
    for name, (text_options, options) in TRACEZ_VARIANTS.items():
        put(f"{name}.tracez", tracez(traceg(**text_options), **options))
    put("nvbit-memtrace.log", nvbit_log())
    put("nvbit-memtrace-old.log", nvbit_log(old=True))
    put("gpgpu_inst_stats.txt", gpgpusim_stats())
    table = expected_accesses().to_table()
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    pq.write_table(table, folder / "canonical.parquet")
    written.append(folder / "canonical.parquet")
    pacsv.write_csv(table.drop_columns(["kernel"]), folder / "canonical.csv")  # kernel defaults to the stem
    written.append(folder / "canonical.csv")
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "traces"
    for path in write_samples(target):
        print(path)
