"""Launches of any size: time and peak memory of ``traceconf analyze``, next to today's behaviour.

Each figure is one ``traceconf analyze`` process (median of REPEATS runs), its
wall time and peak resident memory (``wait4`` rusage of that child).  Beside
each target the same run measures:

* ``--exhaustive``: every CTA emulated, batches counted and dropped; its
  counts must equal the classes' counts (printed: identical / DIFFERENT);
* the tree before issue 13 (``--baseline REV``, exported with ``git archive``)
  where that is safe on this machine: the sizes marked ``baseline`` below (the
  issue's full-size figures need 19 to 22 GB there; ``--baseline-full`` runs
  them anyway).

Every run uses the default level (``auto``: SASS when ptxas is found, as a
user's run does); the hgemm target is also measured with ``--level ptx``.

Targets (issue 13): hgemm_mma_stages_tn-style 4096³ ≤ 10 s and ≤ 1 GB with counts
identical to the exhaustive result; cp.async multi-stage matmul at 1280² ≤ 20 s;
a %ctaid kernel at grid 65535×65535×64 exact through classes in seconds or
stopped cleanly; peak RSS flat (±10%) from 1 to 10,000 CTAs; default limits
stop a runaway cleanly (the work limit); --suggest at most twice the analysis time.

    python scripts/bench_scale.py [--repeats 3] [--quick] [--baseline REV] [--baseline-full]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: main before issue 13 (CTA classes, batches counted and dropped, limits) was merged
DEFAULT_BASELINE = "faebff4"
SCALE = REPO / "tests" / "fixtures" / "scale"
HGEMM = [str(SCALE / "hgemm_stages.sm_90.ptx"), "-k", "<3, 0>", "--block", "256"]
MATMUL = [str(SCALE / "matmul_async.sm_90.ptx"), "-k", "stages<16>", "--block", "16,16"]
CTAID = [str(SCALE / "ctaid.sm_90.ptx"), "--block", "1024", "-p", "2=16000000"]
RUNAWAY = """.version 8.0
.target sm_90
.address_size 64
.visible .entry spin()
{
.reg .b32 %r<4>;
.shared .align 4 .b8 buf[128];
mov.u32 %r1, %tid.x;
shl.b32 %r2, %r1, 2;
st.shared.u32 [%r2], %r1;
LOOP:
bra LOOP;
}
"""


def hgemm(n: int) -> list[str]:
    return HGEMM + ["--grid", f"{n // 128},{n // 128}", "-p", f"3={n}", "-p", f"4={n}", "-p", f"5={n}"]


def matmul(n: int) -> list[str]:
    return MATMUL + ["--grid", f"{n // 16},{n // 16}", "-p", f"3={n}", "-p", f"4={n}"]


def run(args: list[str], checkout: Path = REPO, timeout: float = 900) -> dict:
    """One ``traceconf analyze`` process: wall seconds, peak RSS (MiB), exit status, JSON totals."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    command = [sys.executable, "-m", "traceconf", "analyze", *args]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(command, stdout=out, stderr=err, env=env, cwd=str(checkout))
        try:
            _, status, usage = os.wait4(child.pid, 0)
        except KeyboardInterrupt:
            child.kill()
            raise
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    code = os.waitstatus_to_exitcode(status)
    totals = None
    if "--format" in args and code == 0:
        try:
            totals = [(r["device"], r["totals"]) for r in json.loads(text)["results"]]
            launch = json.loads(text)["results"][0]["launch"]
        except (ValueError, KeyError, IndexError):
            launch = {}
    else:
        launch = {}
    return {"seconds": seconds, "rss_mib": usage.ru_maxrss / 1024, "code": code, "totals": totals,
            "launch": launch, "stderr": errors.strip().splitlines()[-1:] if errors.strip() else [],
            "stdout": text}


@contextmanager
def baseline_tree(revision: str):
    """The traceconf package of ``revision``, exported into a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "traceconf", "grammars"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def median_of(repeats: int, args: list[str], **kw) -> dict:
    runs = [run(args, **kw) for _ in range(repeats)]
    best = runs[len(runs) // 2]
    best["seconds"] = statistics.median(r["seconds"] for r in runs)
    best["rss_mib"] = statistics.median(r["rss_mib"] for r in runs)
    return best


def fmt(r: dict) -> str:
    what = f"{r['seconds']:7.2f} s {r['rss_mib']:8.0f} MiB"
    if r["code"] < 0:
        what += f" KILLED (signal {-r['code']})"
    elif r["code"] not in (0, 1):
        what += f" exit {r['code']}"
    partial = r["launch"].get("partial") if r["launch"] else None
    if partial:
        what += " PARTIAL"
    return what


def line(label: str, target: str, ours: dict, baselines: list[tuple[str, dict]], extra: str = "") -> None:
    print(f"{label:<44} {fmt(ours)}   target {target}{extra}")
    for name, base in baselines:
        print(f"{'':<6}{name:<38} {fmt(base)}")


def json_args(args: list[str]) -> list[str]:
    return args + ["--format", "json"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run each, skip the 10,000-CTA exhaustive runs")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision of the baseline tree")
    parser.add_argument("--baseline-full", action="store_true",
                        help="also run the baseline at the full sizes (needs ~22 GB)")
    options = parser.parse_args()
    repeats = 1 if options.quick else options.repeats
    print(f"bench_scale: {os.cpu_count()} cores, python {sys.version.split()[0]}, median of {repeats} run(s); "
          f"baseline tree {options.baseline}")
    with baseline_tree(options.baseline) as base:
        measure(options, repeats, base)


def measure(options, repeats: int, base: Path) -> None:
    # 1. hgemm 4096³: classes vs exhaustive (and main at 1024³, or 4096³ with --main-full)
    ours = median_of(repeats, json_args(hgemm(4096)))
    full = run(json_args(hgemm(4096) + ["--exhaustive", "--work-limit", "0"]))
    same = "identical" if ours["totals"] == full["totals"] and ours["totals"] else "DIFFERENT"
    ptx = median_of(repeats, json_args(hgemm(4096) + ["--level", "ptx"]))
    baselines = [("--exhaustive (every CTA, streamed)", full), ("--level ptx (classes)", ptx)]
    size = 4096 if options.baseline_full else 1024
    baselines.append((f"baseline tree, {size}³", run(json_args(hgemm(size)), checkout=base)))
    line("hgemm_mma_stages_tn-style 4096³ (1,024 CTAs)", "≤ 10 s, ≤ 1,024 MiB", ours, baselines,
         f"; counts vs exhaustive: {same}; level {ours['launch'].get('level', 'ptx')}")

    # 2. MatrixMulAsyncCopyMultiStageLargeChunk-style 1280² (6,400 CTAs)
    ours = median_of(repeats, json_args(matmul(1280)))
    small, small_full = run(json_args(matmul(320))), run(json_args(matmul(320) + ["--exhaustive", "--work-limit",
                                                                                 "0"]))
    same = "identical" if small["totals"] == small_full["totals"] and small["totals"] else "DIFFERENT"
    baselines = [("--exhaustive at 320² (400 CTAs)", small_full)]
    size = 1280 if options.baseline_full else 320
    baselines.append((f"baseline tree, {size}²", run(json_args(matmul(size)), checkout=base)))
    line("cp.async multi-stage matmul 1280² (6,400 CTAs)", "≤ 20 s", ours, baselines,
         f"; classes vs exhaustive at 320²: {same}")

    # 3. %ctaid kernels at grid 65535×65535×64
    grid = ["--grid", "65535,65535,64"]
    row = median_of(repeats, json_args(CTAID + ["-k", "ctaid_row"] + grid))
    skew = run(json_args(CTAID + ["-k", "ctaid_skew"] + grid))
    baselines = [("ctaid_skew (no class possible): default limits", skew),
                 ("baseline tree, ctaid_row grid 500×1×4",
                  run(json_args(CTAID + ["-k", "ctaid_row", "--grid", "500,1,4"]), checkout=base))]
    classes = row["launch"].get("class_count", 0)
    line("%ctaid kernel, grid 65535×65535×64", "exact via classes in seconds, or a clean stop", row, baselines,
         f"; {classes} classes, {row['launch'].get('analysed_ctas', '?')} CTAs emulated")

    # 4. peak RSS from 1 to 10,000 CTAs, every CTA emulated (no class can be proved for ctaid_skew)
    print("peak RSS, ctaid_skew block 1024, every CTA emulated (--work-limit 0):")
    counts = [1, 10, 100, 1000] + ([] if options.quick else [10_000])
    curve = []
    for ctas in counts:
        r = run(json_args(CTAID + ["-k", "ctaid_skew", "--grid", str(ctas), "--work-limit", "0"]))
        curve.append(r["rss_mib"])
        main_text = ""
        if ctas <= 1000:
            m = run(json_args(CTAID + ["-k", "ctaid_skew", "--grid", str(ctas)]), checkout=base)
            main_text = f"   baseline tree: {m['rss_mib']:7.0f} MiB {m['seconds']:7.2f} s"
        print(f"  {ctas:>6} CTAs: {r['rss_mib']:7.0f} MiB {r['seconds']:7.2f} s{main_text}")
    spread = (max(curve) - min(curve)) / min(curve)
    print(f"  spread {spread:.0%} of the smallest (target ±10%)")

    # 5. runaway: default limits
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as handle:
        handle.write(RUNAWAY)
    spin = run([handle.name, "--block", "32"])
    print(f"{'runaway bra-to-self, default limits':<44} {fmt(spin)}   target: a clean partial stop at the default work limit")
    print(f"{'':<6}{spin['stderr'][0] if spin['stderr'] else ''}")
    os.unlink(handle.name)

    # 6. --suggest on hgemm 1024³
    plain = median_of(repeats, hgemm(1024))
    suggested = median_of(repeats, hgemm(1024) + ["--suggest"])
    baselines = [("without --suggest", plain),
                 ("baseline tree, --suggest", run(hgemm(1024) + ["--suggest"], checkout=base))]
    line("--suggest, hgemm 1024³", "≤ 2× without", suggested, baselines,
         f"; ratio {suggested['seconds'] / plain['seconds']:.2f}")


if __name__ == "__main__":
    main()
