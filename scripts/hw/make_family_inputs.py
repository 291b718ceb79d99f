#!/usr/bin/env python3
"""Write the deterministic .npy inputs of the hardware-collection fixtures (numpy default_rng, fixed seeds).

The drivers of tests/fixtures/{cub,lastblock,samples20}/*.cu read these files on the GPU machine and
`traceconf analyze --data` replays them; tests/data/hw/<family>/manifest.csv names which file feeds which
parameter.  Run from the repository root: ``python3 scripts/hw/make_family_inputs.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"

#: CUB launches: id -> (dtype, items in both CTAs, low, high).  Two CTAs each (the driver's grid).
CUB = {
    "cub_load_store_transpose_i32_96x7": (np.int32, 2 * 96 * 7, -1000, 1000),
    "cub_load_store_warp_transpose_f32_128x8": (np.float32, 2 * 128 * 8, 0, 1),
    "cub_load_store_transpose_f64_160x4": (np.float64, 2 * 160 * 4, 0, 1),
    "cub_load_store_warp_transpose_i16_96x8": (np.int16, 2 * 96 * 8, -1000, 1000),
    "cub_exchange_i16_160x4": (np.int16, 2 * 160 * 4, -1000, 1000),
    "cub_scan_raking_i32_96x7": (np.int32, 2 * 96 * 7, 0, 100),
    "cub_scan_raking_memoize_f32_160x4": (np.float32, 2 * 160 * 4, 0, 1),
    "cub_scan_warp_scans_f64_128x4": (np.float64, 2 * 128 * 4, 0, 1),
    "cub_scan_warp_scans_i32_96x8": (np.int32, 2 * 96 * 8, 0, 100),
    "cub_reduce_raking_i32_96x7": (np.int32, 2 * 96 * 7, 0, 100),
    "cub_reduce_warp_reductions_f32_160x4": (np.float32, 2 * 160 * 4, 0, 1),
    "cub_reduce_raking_commutative_only_f64_128x8": (np.float64, 2 * 128 * 8, 0, 1),
    "cub_shuffle_i32_96x4": (np.int32, 2 * 96 * 4, -1000, 1000),
    "cub_discontinuity_i32_128x4": (np.int32, 2 * 128 * 4, 0, 3),
    "cub_adjacent_difference_f32_160x4": (np.float32, 2 * 160 * 4, 0, 1),
    "cub_radix_sort_u32_128x4": (np.uint32, 2 * 128 * 4, 0, 2**32),
    "cub_radix_sort_pairs_f32_i32_96x7": (np.float32, 2 * 96 * 7, -1, 1),
    "cub_histogram_atomic_u8_128x4": (np.uint8, 2 * 128 * 4, 0, 256),
    "cub_histogram_sort_u8_128x4": (np.uint8, 2 * 128 * 4, 0, 256),
    "cub_merge_sort_i32_128x4": (np.int32, 2 * 128 * 4, -100000, 100000),
    "cub_merge_sort_f32_64x7": (np.float32, 2 * 64 * 7, -1, 1),
}

#: Other families: (folder, file) -> (dtype, count, low, high, seed).
OTHERS = {
    ("lastblock", "last_block_input.npy"): (np.float32, 1 << 18, 0, 1, 21),
    ("samples20", "bitonic_keys.npy"): (np.uint32, 1 << 20, 0, 2**32, 20),
    ("samples20", "histogram64_data.npy"): (np.uint32, 1 << 18, 0, 2**32, 64),
    ("samples20", "histogram256_data.npy"): (np.uint32, 1 << 20, 0, 2**32, 256),
}


def draw(rng: np.random.Generator, dtype, count: int, low: float, high: float) -> np.ndarray:
    if np.issubdtype(dtype, np.floating):
        return (low + (high - low) * rng.random(count)).astype(dtype)
    return rng.integers(low, high, count, dtype=np.int64).astype(dtype)


def main() -> None:
    for seed, (launch, (dtype, count, low, high)) in enumerate(sorted(CUB.items())):
        np.save(FIXTURES / "cub" / f"{launch}.npy", draw(np.random.default_rng(seed), dtype, count, low, high))
    for (folder, name), (dtype, count, low, high, seed) in OTHERS.items():
        np.save(FIXTURES / folder / name, draw(np.random.default_rng(seed), dtype, count, low, high))


if __name__ == "__main__":
    main()
