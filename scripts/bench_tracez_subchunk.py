#!/usr/bin/env python3
"""Peak memory of reading a .tracez whose one sub-chunk is large, against one 30x smaller, in the same run.

Target (issue 25): a sub-chunk just under the 256 MiB cap streams in pieces of the block size, so the peak
RSS of ``traceconf analyze`` stays flat (within 1.5x) between an 8 MiB and a 250 MiB sub-chunk; before,
the 250 MiB one peaked at 2.7 GB.  Each size is read in a fresh process (ru_maxrss of the child).

    python3 scripts/bench_tracez_subchunk.py [--mb 250]
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_sample_traces", REPO / "scripts" / "make_sample_traces.py")
samples = importlib.util.module_from_spec(_spec)
sys.modules["make_sample_traces"] = samples
_spec.loader.exec_module(samples)


def one_subchunk_tracez(path: Path, megabytes: float) -> int:
    """A .tracez of one CTA and one warp whose instruction lines (about ``megabytes`` MiB) are one sub-chunk,
    laid out as Accel-Sim's writer lays it out (see traceconf/traces/tracez.py); returns the line count."""
    import zstandard

    text = samples.traceg(version=5, kernel_id=1)
    head, body = text[:text.index("#BEGIN_TB")], text[text.index("#BEGIN_TB"):]
    warp = body[body.index("insts = "):].split("\n\n")[0].split("\n")[1:]
    unit = "\n".join(warp)
    repeats = int(megabytes * (1 << 20)) // (len(unit) + 1)
    lines = len(warp) * repeats
    frame = zstandard.ZstdCompressor(level=3, write_content_size=True).compress("\n".join([unit] * repeats).encode())
    header = head.replace("-grid dim = (2,1,1)", "-grid dim = (1,1,1)").encode()
    out = bytearray(header + b"\0" + struct.pack("<II", 0, 0))
    index = struct.pack("<I", 1) + struct.pack("<11I", *[0] * 10, 1) + struct.pack("<IIQ", lines, 1, len(out)) \
        + struct.pack("<I", lines)
    out += struct.pack("<III", lines, 1, len(frame)) + frame
    offset = len(out)
    path.write_bytes(bytes(out + index + struct.pack("<Q", offset)))
    return lines


#: Runs the CLI and prints the process's own high-water mark (VmHWM: of this program, not of the parent
#: that forked it, which ru_maxrss of a child would also count).
_MEASURED = """
import atexit, runpy, sys
def report():
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    sys.stderr.write(f"VmHWM {peak}\\n")
atexit.register(report)
sys.argv = ["traceconf", "analyze", sys.argv[1], "--format", "csv"]
runpy.run_module("traceconf", run_name="__main__")
"""


def peak_rss_mb(path: Path) -> tuple[float, float]:
    """(peak RSS in MB, CPU seconds) of ``traceconf analyze PATH`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", _MEASURED, str(path)], check=True, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, cwd=REPO)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = int(done.stderr.rsplit("VmHWM", 1)[1].split()[0]) / 1024
    return peak, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=250, help="text of the large sub-chunk (MiB, under 256)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        small, large = Path(folder) / "small.tracez", Path(folder) / "large.tracez"
        one_subchunk_tracez(small, args.mb / 30)
        lines = one_subchunk_tracez(large, args.mb)
        small_rss, small_cpu = peak_rss_mb(small)
        large_rss, large_cpu = peak_rss_mb(large)
    print(f"sub-chunk of {args.mb / 30:.1f} MiB: peak RSS {small_rss:.0f} MB, {small_cpu:.1f} CPU-s")
    print(f"sub-chunk of {args.mb:.1f} MiB ({lines:,} lines): peak RSS {large_rss:.0f} MB, {large_cpu:.1f} CPU-s")
    flat = large_rss <= 1.5 * small_rss
    print(f"peak RSS ratio {large_rss / small_rss:.2f} (target <= 1.5): {'ok' if flat else 'MISSED'}")
    sys.exit(0 if flat else 1)


if __name__ == "__main__":
    main()
