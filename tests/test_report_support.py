"""Hand-built KernelAnalysis objects for the report tests (no tests in here).

The transpose case mirrors ``tests/fixtures/emulate/transpose.cu`` (32×32 tile,
block 32×8, grid 32×32): four conflict-free row stores and four column loads
that hit one bank 32 times.  Counts are computed here from first principles for
the sm_90 and sm_1x rules (phases of 32 / 16 lanes, distinct 4-byte words per bank), so the
reports are tested against known numbers before the engine exists.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.pipeline import KernelAnalysis
from traceconf.schemas import INSTRUCTION_INFO, INSTRUCTION_RESULTS, KIND_CODES

TILE = 32
WARPS = 8          # block 32×8
SCALE = 1024       # grid 32×32, one CTA analysed
STORES = (10, 14, 18, 22)
LOADS = (30, 34, 38, 42)
NEVER = 50         # a shared load behind a branch no lane takes
UNRESOLVED = 60


def tile_accesses(kernel: str = "transpose_unpadded", row_words: int = TILE) -> WarpAccesses:
    """Every warp-level shared access of one CTA, in the kernel's program order."""
    lane = np.arange(32)
    rows = []
    for ident, j in zip(STORES, range(0, TILE, WARPS)):
        for warp in range(WARPS):
            rows.append((ident, "st", (warp + j) * row_words * 4 + lane * 4, warp))
    for ident, j in zip(LOADS, range(0, TILE, WARPS)):
        for warp in range(WARPS):
            rows.append((ident, "ld", lane * row_words * 4 + (warp + j) * 4, warp))
    n = len(rows)
    return WarpAccesses(
        kernel=kernel,
        cta=np.zeros(n, np.int64),
        warp=np.array([r[3] for r in rows], np.int32),
        execution=np.arange(n, dtype=np.int64),
        instruction=np.array([r[0] for r in rows], np.int32),
        kind=np.array([KIND_CODES[r[1]] for r in rows], np.int8),
        bytes=np.full(n, 4, np.int16),
        matrices=np.zeros(n, np.int8),
        address=np.stack([r[2] for r in rows]).astype(np.int64),
    )


#: Devices the hand-built results know: (banks, lanes per group) of 4-byte accesses.  sm_1x serves a warp as
#: two half-warps on 16 banks, so its columns differ from sm_90's and a swapped column shows.
BANKING = {"sm_90": (32, 32), "sm_1x": (16, 16)}


def device_counts(address: np.ndarray, device: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wavefronts, ideal, max_ways) per execution for 4-byte accesses of distinct words: per lane group,
    the busiest bank's number of distinct words."""
    banks, lanes = BANKING[device]
    words = np.where(address == INACTIVE, -1, address >> 2)
    wavefronts, ideal, ways = [], [], []
    for row in words:
        groups = [g[g >= 0] for g in row.reshape(-1, lanes)]
        passes = [np.bincount(np.unique(g) % banks, minlength=banks).max() for g in groups if len(g)]
        wavefronts.append(sum(passes))
        ideal.append(len(passes))
        ways.append(max(passes, default=0))
    return np.array(wavefronts), np.array(ideal), np.array(ways)


def results_for(accesses: WarpAccesses, device: str, scale: int = SCALE) -> pa.Table:
    wavefronts, ideal, ways = device_counts(accesses.address, device)
    out = []
    for ident in np.unique(accesses.instruction):
        mask = accesses.instruction == ident
        n = int(mask.sum())
        out.append({"device": device, "kernel": accesses.kernel, "instruction": int(ident),
                    "kind": "st" if int(ident) in STORES else "ld", "bytes": 4,
                    "executions": n * scale, "wavefronts": int(wavefronts[mask].sum()) * scale,
                    "ideal_wavefronts": int(ideal[mask].sum()) * scale,
                    "excess_wavefronts": int(wavefronts[mask].sum() - ideal[mask].sum()) * scale,
                    "max_ways": int(ways[mask].max())})
    return pa.Table.from_pylist(out, schema=INSTRUCTION_RESULTS)


def info_rows(kernel: str, source_file: str | None = "transpose.cu") -> pa.Table:
    rows = []
    for ident, line in zip(STORES, range(100, 104)):
        rows.append({"kernel": kernel, "instruction": ident, "text": f"st.shared.f32 [%r{ident}], %f1",
                     "kind": "st", "bytes": 4, "ptx_line": line, "pc": None,
                     "source_file": source_file, "source_line": 12})
    for ident, line in zip(LOADS, range(110, 114)):
        rows.append({"kernel": kernel, "instruction": ident, "text": f"ld.shared.f32 %f2, [%r{ident}]",
                     "kind": "ld", "bytes": 4, "ptx_line": line, "pc": None,
                     "source_file": source_file, "source_line": 17})
    rows.append({"kernel": kernel, "instruction": NEVER, "text": "ld.shared.v4.f32 {%f5, %f6, %f7, %f8}, [%r50]",
                 "kind": "ld", "bytes": 16, "ptx_line": 120, "pc": None, "source_file": None, "source_line": None})
    rows.append({"kernel": kernel, "instruction": UNRESOLVED, "text": "st.shared.u32 [%r60], %r61",
                 "kind": "st", "bytes": 4, "ptx_line": 130, "pc": None, "source_file": None, "source_line": None})
    return pa.Table.from_pylist(rows, schema=INSTRUCTION_INFO)


def transpose_analysis(kernel: str = "transpose_unpadded", devices=("sm_90",), row_words: int = TILE,
                       input_path: str = "tests/fixtures/emulate/transpose.ptx",
                       source_file: str | None = "transpose.cu") -> KernelAnalysis:
    accesses = tile_accesses(kernel, row_words)
    results = pa.concat_tables([results_for(accesses, device) for device in devices])
    return KernelAnalysis(
        kernel=kernel, input_path=input_path, input_format="ptx",
        launch={"block": [32, 8, 1], "grid": [32, 32, 1], "params": {}, "dynamic_smem": 0,
                "analysed_ctas": 1, "scale": SCALE},
        results=results, instructions=info_rows(kernel, source_file),
        unresolved=[{"instruction": UNRESOLVED, "reason": "address depends on a global load"}],
        accesses={32: accesses},
    )
