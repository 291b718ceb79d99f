"""NVBit mem_trace records no active mask: lanes printed as 0x0 did not take part (NVBit issue #130).

The logs here are written by hand for a partial warp (a 48-thread block: warp 1 has 16 lanes) and a
divergent branch (lanes 0-7 take one side, lanes 8-31 the other).  Shared addresses in a real log are
generic addresses inside the 16 MiB-aligned shared window, so a 0x0 lane can never be a shared access;
counting it as one would put it in bank 0 and add a wavefront to each access below.
"""

from __future__ import annotations

import numpy as np
import pytest

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.rules import load_rule_set
from traceconf.pipeline import run_trace
from traceconf.traces import open_trace

WINDOW = 0x7F3A5C000000
LAUNCH = ("MEMTRACE: CTX 0x1 - LAUNCH - Kernel pc 0x2 - Kernel name divergent - grid launch id 1 - grid size "
          "1,1,1 - block size 48,1,1 - nregs 8 - shmem 4096 - cuda stream id 0")


def line(warp: int, opcode: str, offsets: dict[int, int]) -> str:
    """An access line: lanes in ``offsets`` at WINDOW + offset, every other lane printed as 0x0."""
    addresses = [f"0x{WINDOW + offsets[lane]:016x}" if lane in offsets else "0x0000000000000000"
                 for lane in range(32)]
    return f"MEMTRACE: CTX 0x1 - grid_launch_id 0 - CTA 0,0,0 - warp {warp} - {opcode} - " + " ".join(addresses)


@pytest.fixture
def log(tmp_path):
    lines = [
        LAUNCH,
        # warp 0, if-side: lanes 0-7 read banks 0-7 (lane 0 at word 32, bank 0): one wavefront
        line(0, "LDS", {lane: 128 + 4 * lane for lane in range(8)}),
        # warp 0, else-side: lanes 8-31, 8 bytes apart: 24 lanes x 8 bytes = 192 bytes, two wavefronts
        line(0, "LDS.64", {lane: 256 + 8 * (lane - 8) for lane in range(8, 32)}),
        # warp 1 of a 48-thread block: lanes 16-31 do not exist
        line(1, "STS", {lane: 128 + 4 * lane for lane in range(16)}),
        # warp 1 predicated off entirely: every lane 0x0, no access
        line(1, "LDS", {}),
    ]
    path = tmp_path / "divergent.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_zero_lanes_are_inactive(log):
    kt = next(iter(open_trace(log)))
    got = WarpAccesses.concat(list(kt.chunks()))
    assert len(got) == 3  # the all-zero line is no execution
    active = got.address != INACTIVE
    assert np.flatnonzero(active[0]).tolist() == list(range(8))
    assert np.flatnonzero(active[1]).tolist() == list(range(8, 32))
    assert np.flatnonzero(active[2]).tolist() == list(range(16))
    assert got.address[0, :8].tolist() == [128 + 4 * lane for lane in range(8)]
    assert got.warp.tolist() == [0, 0, 1]
    assert "0x0" in kt.launch["active_mask"]


def test_zero_lanes_add_no_wavefronts(log):
    [analysis], failures = run_trace(log, None, [load_rule_set("sm_90")])
    assert failures == []
    rows = {(r["kind"], r["bytes"]): r for r in analysis.results.to_pylist()}
    lds, lds64, sts = rows[("ld", 4)], rows[("ld", 8)], rows[("st", 4)]
    # the all-zero LDS line of warp 1 is not an execution of the LDS instruction
    assert (lds["executions"], lds["wavefronts"], lds["excess_wavefronts"]) == (1, 1, 0)
    assert (lds64["executions"], lds64["wavefronts"], lds64["excess_wavefronts"]) == (1, 2, 0)
    assert (sts["executions"], sts["wavefronts"], sts["excess_wavefronts"]) == (1, 1, 0)
