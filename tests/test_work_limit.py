"""The default stop is a budget of emulated work (warp steps), not the clock: the same launch stops at the same
place, with the same PARTIAL output, whatever else the machine is doing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import FIXTURES
from test_emulate_support import kernel_module, run
from traceconf.emulate.launch import DEFAULT_WORK_LIMIT, STEP_OVERHEAD_WARPS, Launch, LimitReached, Limits

SCALE = FIXTURES / "scale"
REPO = FIXTURES.parent.parent

RUNAWAY = """
        mov.u32 %r1, %tid.x;
        shl.b32 %r5, %r1, 2;
        st.shared.u32 [%r5], %r1;
        LOOP:
        st.shared.u32 [%r5], %r1;
        bra LOOP;"""


def test_the_default_limit_is_work_not_the_clock():
    assert Launch().time_limit is None and Launch().work_limit == DEFAULT_WORK_LIMIT
    # even a one-warp runaway stops, partial, at the work limit before --max-steps makes it an error
    assert DEFAULT_WORK_LIMIT // (1 + STEP_OVERHEAD_WARPS) < Launch().max_steps


def test_a_runaway_loop_stops_at_the_work_limit_after_exactly_that_much_work():
    module = kernel_module(RUNAWAY, shared=".shared .align 4 .b8 buf[512];\n")
    # 2 warps: a step costs 2 + STEP_OVERHEAD_WARPS; the loop body is 2 steps
    per_step = 2 + STEP_OVERHEAD_WARPS
    result = run(module, block=(64, 1, 1), work_limit=500 * per_step + 3, max_steps=10**12)
    assert result.partial and f"work limit of {500 * per_step + 3:,} warp steps" in result.partial
    assert "--work-limit" in result.partial and result.work == 500 * per_step and result.steps == 500
    # the store before the loop, then one store per trip: 2 steps per trip after 3 steps of set-up
    assert len(result.accesses) == 2 * (1 + (500 - 3 + 1) // 2)


def test_work_counts_across_batches_and_stops_between_them():
    per_step = 4 + STEP_OVERHEAD_WARPS
    limits = Limits(None, 1 << 40, work_limit=2 * per_step + 1)
    assert limits.steps_left(4) == 2
    limits.spend(2, 4)
    assert limits.steps_left(4) == 0 and limits.work == 2 * per_step
    limits.check()
    limits.spend(1, 0)
    with pytest.raises(LimitReached, match=f"work limit of {2 * per_step + 1} warp steps"):
        limits.check()
    assert Limits(None, 1 << 40, work_limit=None).steps_left(4) is None


def test_the_work_limit_is_off_with_none_and_the_clock_only_when_asked():
    module = kernel_module(RUNAWAY.replace("bra LOOP;", "ret;"), shared=".shared .align 4 .b8 buf[512];\n")
    result = run(module, work_limit=None, time_limit=None)
    assert not result.partial and result.work == result.steps * (1 + STEP_OVERHEAD_WARPS)


CTAID = [str(SCALE / "ctaid.sm_90.ptx"), "-k", "ctaid_skew", "--block", "1024", "--grid", "4096", "-p",
         "2=4000000", "--level", "ptx", "--format", "json", "--work-limit", "200000"]


def _analyze(args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "traceconf", "analyze", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


def test_the_same_launch_gives_the_same_partial_output_beside_a_busy_process():
    quiet = _analyze(CTAID)
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = _analyze(CTAID)
        again = _analyze(CTAID)
    finally:
        burner.kill()
        burner.wait()
    assert quiet.returncode == busy.returncode == again.returncode == 0, quiet.stderr
    assert quiet.stdout == busy.stdout == again.stdout and quiet.stderr == busy.stderr
    launch = json.loads(quiet.stdout)["results"][0]["launch"]
    assert launch["partial"].startswith("stopped at the work limit of 200,000 warp steps")
    assert 0 < launch["covered_ctas"] < launch["total_ctas"] and "raise it with --work-limit N" in quiet.stderr


def test_the_python_api_takes_the_work_limit():
    import traceconf
    frame = traceconf.analyze_ptx(FIXTURES / "emulate" / "transpose.ptx", kernel="transpose_padded", block=(32, 8),
                                  grid=(4, 4), work_limit=50, level="ptx")
    # where it stops depends on which instructions count as steps (the slice skips some): any line of the body
    [partial] = frame.attrs["partial"]
    assert re.fullmatch(r"transpose_padded: stopped at the work limit of 50 warp steps \(at PTX line \d+\); "
                        r"raise it with --work-limit N", partial), partial
    assert traceconf.analyze_ptx(FIXTURES / "emulate" / "transpose.ptx", kernel="transpose_padded", block=(32, 8),
                                 grid=(4, 4)).attrs["partial"] == []
