"""The glue keeps every result it computed when the input goes bad part-way."""

from __future__ import annotations

import shutil
from pathlib import Path

from traceconf.pipeline import run_trace
from traceconf.rules import load_rule_set

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "traces"


def _kernelslist(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(SAMPLES / "accelsim-kernelslist", folder)
    return folder / "kernelslist.g"


def test_a_missing_launch_keeps_the_launches_before_it(tmp_path):
    listing = _kernelslist(tmp_path)
    (listing.parent / "kernel-2.traceg.xz").unlink()
    done, failed = run_trace(listing, None, [load_rule_set("sm_90")])
    assert len(done) == 1 and done[0].results.num_rows > 0
    assert len(failed) == 1 and "kernel-2" in failed[0].error.message
    assert failed[0].error.file and failed[0].error.line


def test_a_malformed_line_keeps_the_accesses_before_it(tmp_path):
    trace = tmp_path / "k.traceg"
    lines = (SAMPLES / "accelsim-v4-lineinfo.traceg").read_text().splitlines(keepends=True)
    last_sts = max(i for i, line in enumerate(lines) if " LDS" in line or " STS" in line)
    lines.insert(last_sts, "this is not an instruction line\n")
    trace.write_text("".join(lines))
    done, failed = run_trace(trace, None, [load_rule_set("sm_90")])
    assert failed and failed[0].error.line == last_sts + 1
    # the accesses read before the bad line are still reported, marked incomplete
    assert any("incomplete" in note for note in done[0].notes)
    assert sum(done[0].results.column("executions").to_pylist()) > 0
