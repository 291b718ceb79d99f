"""Throughput of the wavefront engine on sm_90, single-threaded, against the scalar reference.

Builds an in-memory ACCESSES table of mixed, realistic shared-memory patterns
(tiles read along rows and columns, padded and swizzled tiles, float2/float4
vectors, broadcasts, ldmatrix, divergent lanes, histogram atomics), then times

* the pivot of the long Arrow table into dense warps (``accesses.from_table``),
* ``engine.analyze`` on the dense warps, with the pattern memo (default) and without
  (warp-level executions/s, lane accesses/s); results must be identical,
* the same for a worst case: every lane a random address, nothing repeats,
* a plain per-warp Python loop over ``reference.execution_cost`` on a subset,

and prints the ratio engine / reference measured in the same run.  Target:
>= 10 million warp-level executions per second per core.

    python3 scripts/bench_engine.py [--executions 2000000] [--reference 20000]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from traceconf.accesses import INACTIVE, WarpAccesses, from_table  # noqa: E402
from traceconf.engine import analyze  # noqa: E402
from traceconf.reference import execution_cost  # noqa: E402
from traceconf.rules import load_rule_set  # noqa: E402
from traceconf.schemas import KIND_CODES, KINDS  # noqa: E402

LANE = np.arange(32)

#: (name, weight, kind, bytes, matrices, lane offsets within one warp's tile, active lanes)
PATTERNS = [
    ("row of a float tile", 20, "ld", 4, 0, 4 * LANE, None),
    ("column of a 32x32 float tile", 8, "ld", 4, 0, 128 * LANE, None),
    ("column of a padded 32x33 tile", 8, "ld", 4, 0, 132 * LANE, None),
    ("transpose store", 8, "st", 4, 0, 128 * LANE, None),
    ("float2 row", 10, "ld", 8, 0, 8 * LANE, None),
    ("float4 row", 10, "ld", 16, 0, 16 * LANE, None),
    ("float4 broadcast", 4, "ld", 16, 0, 0 * LANE, None),
    ("float4 column, 64-B stride", 4, "ld", 16, 0, 64 * LANE, None),
    ("ldmatrix.x4 plain 128-B rows", 6, "ldmatrix", 16, 4, 128 * LANE, None),
    ("ldmatrix.x4 SW128 swizzled", 6, "ldmatrix", 16, 4, 128 * LANE + 16 * ((LANE % 8) ^ (LANE // 8 % 8)), None),
    ("divergent half warp", 6, "ld", 4, 0, 4 * LANE, LANE < 16),
    ("reduction tail, stride 2", 4, "ld", 4, 0, 8 * LANE, LANE % 2 == 0),
    ("cp.async 16 B row", 6, "cp_async", 16, 0, 16 * LANE, None),
]
HISTOGRAM = ("histogram atomics, 256 bins", 6, "atom", 4, 0)


def build_warps(n: int, seed: int = 1) -> WarpAccesses:
    """``n`` executions of the mixed patterns, each warp at its own tile base."""
    rng = np.random.default_rng(seed)
    weights = np.array([p[1] for p in PATTERNS] + [HISTOGRAM[1]], dtype=float)
    which = rng.choice(len(weights), size=n, p=weights / weights.sum())
    address = np.full((n, 32), INACTIVE, dtype=np.int64)
    kind = np.zeros(n, np.int8)
    nbytes = np.zeros(n, np.int16)
    matrices = np.zeros(n, np.int8)
    base = rng.integers(0, 48, n) * 4096                      # tiles inside a 192 KiB window
    for p, (_, _, k, b, m, offsets, active) in enumerate(PATTERNS):
        rows = np.nonzero(which == p)[0]
        address[rows] = np.where(active if active is not None else True, base[rows, None] + offsets, INACTIVE)
        kind[rows], nbytes[rows], matrices[rows] = KIND_CODES[k], b, m
    rows = np.nonzero(which == len(PATTERNS))[0]
    address[rows] = rng.integers(0, 256, (len(rows), 32)) * 4
    kind[rows], nbytes[rows] = KIND_CODES[HISTOGRAM[2]], HISTOGRAM[3]
    warp = (np.arange(n) % 8).astype(np.int32)
    return WarpAccesses("bench", np.arange(n) // 64, warp, np.arange(n), (which * 3).astype(np.int32),
                        kind, nbytes, matrices, address)


def random_warps(n: int, seed: int = 2) -> WarpAccesses:
    """Worst case for the memo: 4/8/16-byte loads and stores, every lane a random aligned address."""
    rng = np.random.default_rng(seed)
    nbytes = rng.choice(np.array([4, 8, 16], np.int16), n)
    address = rng.integers(0, 48 * 1024 // 16, (n, 32)) * nbytes[:, None]
    kind = rng.choice(np.array([KIND_CODES["ld"], KIND_CODES["st"]], np.int8), n)
    return WarpAccesses("random", np.arange(n) // 64, (np.arange(n) % 8).astype(np.int32), np.arange(n),
                        np.zeros(n, np.int32), kind, nbytes, np.zeros(n, np.int8), address.astype(np.int64))


def long_table(acc: WarpAccesses) -> pa.Table:
    """The same executions as a long ACCESSES table (one row per active lane)."""
    return acc.to_table()


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=2_000_000)
    parser.add_argument("--reference", type=int, default=20_000, help="executions timed through the reference")
    args = parser.parse_args()
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    rules = load_rule_set("sm_90")

    warps = build_warps(args.executions)
    table = long_table(warps)
    lane_accesses = table.num_rows
    print(f"workload: {args.executions:,} warp-level executions, {lane_accesses:,} lane accesses, "
          f"{len(PATTERNS) + 1} patterns, device sm_90, 1 thread")

    (pivoted,), pivot_s = timed(from_table, table, 32)
    print(f"pivot (from_table)   {pivot_s:7.2f} s  {args.executions / pivot_s / 1e6:7.2f} M executions/s  "
          f"{lane_accesses / pivot_s / 1e6:7.1f} M lane accesses/s")

    executions, engine_s = timed(analyze, pivoted, rules)
    engine_rate = args.executions / engine_s
    print(f"engine, memo         {engine_s:7.2f} s  {engine_rate / 1e6:7.2f} M executions/s  "
          f"{lane_accesses / engine_s / 1e6:7.1f} M lane accesses/s")
    full, full_s = timed(analyze, pivoted, rules, False)
    print(f"engine, no memo      {full_s:7.2f} s  {args.executions / full_s / 1e6:7.2f} M executions/s  "
          f"{lane_accesses / full_s / 1e6:7.1f} M lane accesses/s   (identical: {full.equals(executions)})")
    random = random_warps(args.executions)
    worst, worst_s = timed(analyze, random, rules)
    worst_full, worst_full_s = timed(analyze, random, rules, False)
    print(f"worst case (random)  memo {args.executions / worst_s / 1e6:5.2f} M executions/s, "
          f"no memo {args.executions / worst_full_s / 1e6:5.2f} M executions/s  "
          f"({32 * args.executions / worst_s / 1e6:.1f} / {32 * args.executions / worst_full_s / 1e6:.1f} "
          f"M lane accesses/s; identical: {worst.equals(worst_full)})")

    subset = warps.take(np.arange(min(args.reference, args.executions)))
    kinds = [KINDS[k] for k in subset.kind]

    def reference_loop():
        return [execution_cost(rules, kinds[i], int(subset.bytes[i]), int(subset.matrices[i]),
                               subset.address[i].tolist()).wavefronts for i in range(len(subset))]

    expected, reference_s = timed(reference_loop)
    reference_rate = len(subset) / reference_s
    print(f"reference (per warp) {reference_s:7.2f} s  {reference_rate / 1e6:7.3f} M executions/s  "
          f"on {len(subset):,} executions")
    agree = executions.column("wavefronts").slice(0, len(subset)).to_pylist() == expected
    print(f"engine / reference   {engine_rate / reference_rate:7.1f} x   (results agree on the subset: {agree})")
    # The target, "10 million warp-level accesses/s from an in-memory Arrow table", read both ways:
    # rows of the ACCESSES table (one per lane access) end to end, and warp-level executions.
    target = 10e6
    end_to_end = pivot_s + engine_s
    for label, rate in (("Arrow rows (lane accesses) end to end", lane_accesses / end_to_end),
                        ("warp-level executions end to end", args.executions / end_to_end),
                        ("warp-level executions, engine alone", engine_rate)):
        print(f"target 10 M/s, {label:38s}: {rate / 1e6:6.2f} M/s  "
              f"{'met' if rate >= target else 'NOT met'} ({rate / target:.0%})")
    total = executions.column("wavefronts").to_numpy().sum()
    ideal = executions.column("ideal_wavefronts").to_numpy().sum()
    print(f"workload wavefronts {total:,}, ideal {ideal:,}, excess {total - ideal:,}")


if __name__ == "__main__":
    main()
