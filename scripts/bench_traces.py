#!/usr/bin/env python3
"""Trace-reader throughput and memory, against a naive line-by-line parser measured in the same run.

Targets (issue #5): >= 50 MB/s of .traceg text per core into WarpAccesses;
>= 10M lane accesses/s from canonical Parquet into WarpAccesses; peak RSS flat
between a trace and one 10x its size.

    python3 scripts/bench_traces.py [--mb 40]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_sample_traces", REPO / "scripts" / "make_sample_traces.py")
samples = importlib.util.module_from_spec(_spec)
sys.modules["make_sample_traces"] = samples
_spec.loader.exec_module(samples)

from traceconf.traces import open_trace  # noqa: E402


#: A real trace (30% shared lines, 138-line warps) when ../shared is present; else the dense sample kernel.
MATRIXMUL = REPO.parent / "shared" / "traces" / "microgpusim-matrixmul" / "kernel-1.traceg"


def source_trace() -> tuple[str, str]:
    if MATRIXMUL.exists():
        return "real matrixmul kernel-1.traceg (v4, sm_61)", MATRIXMUL.read_text()
    return "generated sample kernel (v4, 70% shared lines)", samples.traceg(version=4, immediates=1)


_ADDRESS = re.compile(r"\b0x([0-9a-fA-F]+)")


def big_traceg(path: Path, megabytes: float, distinct: bool = False) -> int:
    """The source trace with its first CTA repeated (new CTA ids) until the file reaches ``megabytes``.

    The copies repeat their CTA's lines exactly, which the reader exploits (it parses each distinct line
    text once); with ``distinct``, every address of copy ``k`` is moved by ``4 * k`` bytes, so that no
    line with an address (global or shared) repeats across CTAs: only ALU lines and the lines that warps
    of one CTA share still repeat.
    """
    text = source_trace()[1]
    head, _, body = text.partition("#BEGIN_TB")
    cta = "#BEGIN_TB" + body.split("#BEGIN_TB")[0]
    copies = max(1, int(megabytes * 1e6 / len(cta)))
    head = re.sub(r"-grid dim = \(\d+,\d+,\d+\)", f"-grid dim = ({copies},1,1)", head)
    with open(path, "w") as out:
        out.write(head)
        for index in range(copies):
            copy = cta.replace("thread block = 0,0,0", f"thread block = {index},0,0")
            if distinct:
                copy = _ADDRESS.sub(lambda m: f"0x{int(m.group(1), 16) + 4 * index:x}", copy)
            out.write(copy)
    return path.stat().st_size


def fast_read(path: Path) -> tuple[int, int]:
    executions = lanes = 0
    for kt in open_trace(path):
        for chunk in kt.chunks():
            executions += len(chunk)
            lanes += int((chunk.address >= 0).sum())
    return executions, lanes


_SHARED = re.compile(r"^(LDS|STS|ATOMS|LDSM|STSM)(\.|$)")
_GENERIC = re.compile(r"^(LD|ST|ATOM|RED)(\.|$)")
_BASE = re.compile(r"-shmem base_addr = (0x[0-9a-fA-F]+)")


def naive_read(path: Path) -> tuple[int, int]:
    """Line by line in Python: the baseline a straightforward reader would be."""
    executions = lanes = 0
    rows = []
    base = None
    with open(path) as lines:
        for line in lines:
            match = _BASE.match(line)
            if match:
                base = int(match.group(1), 16)
            tokens = line.split()
            if not tokens or not tokens[0][0] in "0123456789abcdef" or tokens[0] in ("cluster",):
                continue
            try:
                mask = int(tokens[1], 16)
                dests = int(tokens[2])
                opcode = tokens[3 + dests]
            except (ValueError, IndexError):
                continue
            generic = bool(_GENERIC.match(opcode))
            if not (generic or _SHARED.match(opcode)) or mask == 0:
                continue
            sources = int(tokens[4 + dests])
            at = 5 + dests + sources
            mode = int(tokens[at + 1])
            active = [lane for lane in range(32) if mask >> lane & 1]
            address = [-1] * 32
            if mode == 1:
                base, stride = int(tokens[at + 2], 16), int(tokens[at + 3])
                for k, lane in enumerate(active):
                    address[lane] = base + k * stride
            elif mode == 2:
                value = int(tokens[at + 2], 16)
                for k, lane in enumerate(active):
                    value = value if k == 0 else value + int(tokens[at + 2 + k])
                    address[lane] = value
            else:
                for k, lane in enumerate(active):
                    address[lane] = int(tokens[at + 2 + k], 16)
            if generic:
                address = [a - base if base is not None and base <= a < base + (1 << 24) else -1 for a in address]
                active = [a for a in address if a >= 0]
                if not active:
                    continue
            rows.append(address)
            executions += 1
            lanes += len(active)
            if len(rows) >= 65536:
                np.array(rows)
                rows = []
    return executions, lanes


def peak_rss_mb(path: Path) -> float:
    """Peak RSS of a fresh process that streams the whole trace."""
    # VmHWM of the child's own address space (ru_maxrss would carry the parent's peak across fork/exec)
    code = ("import sys; sys.path.insert(0, %r); from bench_traces import fast_read; from pathlib import Path;"
            "fast_read(Path(%r)); print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])"
            ) % (str(REPO / "scripts"), str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1]) / 1024


def timed(function, *args):
    """(wall seconds, result); the CPU seconds of the call are left in ``timed.cpu``.

    Throughput "per core" is judged on CPU time: on a shared, loaded machine wall time also counts the
    time other processes hold the core.
    """
    start, cpu = time.perf_counter(), time.process_time()
    result = function(*args)
    timed.cpu = time.process_time() - cpu
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=40, help="size of the .traceg to parse (MB)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        trace = folder / "big.traceg"
        print(f"source: {source_trace()[0]}")
        size = big_traceg(trace, args.mb)
        seconds, (executions, lanes) = timed(fast_read, trace)
        cpu = timed.cpu
        small = folder / "small.traceg"
        small_size = big_traceg(small, max(args.mb / 8, 1))
        naive_seconds, naive = timed(naive_read, small)
        fast_small_seconds, fast = timed(fast_read, small)
        assert naive == fast, (naive, fast)
        print(f".traceg -> WarpAccesses: {size / 1e6:.1f} MB in {seconds:.2f} s = {size / 1e6 / seconds:.1f} MB/s "
              f"({executions / seconds / 1e6:.2f} M warp accesses/s, {lanes / seconds / 1e6:.1f} M lane accesses/s); "
              f"per CPU second: {size / 1e6 / cpu:.1f} MB/s (target >= 50)")
        print(f"naive line-by-line parser: {small_size / 1e6 / naive_seconds:.1f} MB/s; "
              f"vectorized reader is {naive_seconds / fast_small_seconds:.1f}x faster on the same "
              f"{small_size / 1e6:.1f} MB")
        moved = folder / "distinct.traceg"
        moved_size = big_traceg(moved, args.mb, distinct=True)
        seconds, _ = timed(fast_read, moved)
        print(f".traceg, addresses distinct per CTA: {moved_size / 1e6:.1f} MB in {seconds:.2f} s = "
              f"{moved_size / 1e6 / seconds:.1f} MB/s; per CPU second: {moved_size / 1e6 / timed.cpu:.1f} MB/s")
        moved.unlink()

        # canonical Parquet -> WarpAccesses (and through the engine when present)
        parquet = folder / "accesses.parquet"
        import pyarrow.parquet as pq

        writer = None
        for kt in open_trace(trace):
            for chunk in kt.chunks():
                table = chunk.to_table()
                writer = writer or pq.ParquetWriter(parquet, table.schema)
                writer.write_table(table)
        writer.close()
        rows = pq.ParquetFile(parquet).metadata.num_rows
        seconds, (executions, _) = timed(fast_read, parquet)
        print(f"Parquet -> WarpAccesses: {rows / seconds / 1e6:.1f} M lane accesses/s "
              f"({executions / seconds / 1e6:.2f} M warp accesses/s, {rows:,} rows); "
              f"per CPU second: {rows / timed.cpu / 1e6:.1f} M lane accesses/s (target >= 10)")
        try:
            from traceconf.engine import analyze
            from traceconf.rules import load_rule_set
        except ImportError:
            analyze = None
        if analyze is not None:
            rules = load_rule_set("sm_90")

            def through_engine():
                for kt in open_trace(parquet):
                    for chunk in kt.chunks():
                        analyze(chunk, rules)

            seconds, _ = timed(through_engine)
            print(f"Parquet -> WarpAccesses -> analyze(sm_90): {rows / seconds / 1e6:.1f} M lane accesses/s; "
                  f"per CPU second: {rows / timed.cpu / 1e6:.1f} M")

        one = folder / "one.traceg"
        ten = folder / "ten.traceg"
        one_size, ten_size = big_traceg(one, args.mb / 4), big_traceg(ten, args.mb * 2.5)
        print(f"peak RSS streaming {one_size / 1e6:.0f} MB: {peak_rss_mb(one):.0f} MiB; "
              f"{ten_size / 1e6:.0f} MB (10x): {peak_rss_mb(ten):.0f} MiB")


if __name__ == "__main__":
    main()
