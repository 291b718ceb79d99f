"""A recorded run, harvested here, against the Source pages of its launches (tests/data/hw/triton_record).

``scripts/hw/collect_triton_record.sh`` ran ``scripts/hw/triton_record.py`` on the GPU machine (an H100;
a run of the same script on an H200 gave the same wavefronts at every pc) under ``ncu --clock-control none
--section SourceCounters --profile-from-start off``:
Triton's tutorial softmax and matmul and a ``torch.compile``d layer_norm → softmax with a column sum
(Inductor: two kernels), each twice to warm up and once profiled, with what docs/triton.md asks a user to
switch on: ``traceconf.triton.record_launches`` and tritonparse's ``init(..., enable_trace_launch=True)``.
Committed: the run's Triton cache (cubin, PTX, metadata, Triton IR of each kernel), both launch logs
(tritonparse's compilation events without their IR texts), ``cases.json`` (which record lines each case's
profiled launches wrote) and one Source page per profiled launch, in launch order, with the raw page.

The harvest of the cache with either log is compared pc by pc with the pages (wavefronts and ideal of the
LSU shared-memory instructions), as tests/test_triton_families.py does.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "triton_record"

pytest.importorskip("triton", reason="Triton is not installed (pip install 'traceconf[triton]')")
pytestmark = pytest.mark.skipif(not (DATA / "cases.json").exists(), reason="the recorded run is not in this tree")

LOGS = {"record_launches": "launches.jsonl", "tritonparse": "tritonparse.ndjson"}

#: Profiled launches whose page differs from the prediction at some pc: case -> the evidence.
GAPS: dict[str, str] = {}


def profiled() -> list[tuple[str, int, dict]]:
    """(case, page index, launch record) of every profiled launch, in launch order."""
    if not (DATA / "cases.json").exists():
        return []
    records = [json.loads(line) for line in (DATA / "launches.jsonl").read_text().splitlines()]
    out = []
    for case, (first, end) in json.loads((DATA / "cases.json").read_text())["cases"].items():
        out.extend((case, index, records[index]) for index in range(first, end))
    first = out[0][1] if out else 0
    return [(case, index - first, record) for case, index, record in out]


def page(index: int) -> dict[int, dict]:
    rows = list(csv.reader(open(DATA / "source" / f"{index}.csv")))
    body = [dict(zip(rows[1], r)) for r in rows[2:]]
    base = int(body[0]["Address"], 16)
    return {int(r["Address"], 16) - base: r for r in body}


_HARVESTS: dict[str, object] = {}


def harvested(log: str):
    if log not in _HARVESTS:
        import traceconf.triton
        _HARVESTS[log] = traceconf.triton.harvest(DATA / "cache", DATA / LOGS[log])
    return _HARVESTS[log]


def rows_of(table, record: dict):
    from traceconf.triton.cached import _label      # the label a harvest gives a launch
    label = _label(record["grid"], record["params"])
    return table[(table.cache_hash == record["hash"]) & (table.launch == label)]


def test_the_raw_page_names_the_recorded_launches():
    raw = list(csv.DictReader(open(DATA / "raw.csv")))[1:]      # a units row after the header
    launches = profiled()
    assert [(row["Kernel Name"], row["Grid Size"], row["Block Size"]) for row in raw] == \
        [(record["kernel"], f"({', '.join(map(str, record['grid']))})", f"({32 * record['num_warps']}, 1, 1)")
         for _, _, record in launches]
    assert {case for case, _, _ in launches} == set(json.loads((DATA / "cases.json").read_text())["cases"])


def test_both_logs_give_the_same_harvest():
    import pandas as pd
    a, b = harvested("record_launches"), harvested("tritonparse")
    assert a.attrs["kernels"] == b.attrs["kernels"] == 4 and a.attrs["launches"] == b.attrs["launches"] == 4
    assert not a.attrs["failures"] and not b.attrs["failures"]
    columns = ["kernel", "launch", "calls", "cache_hash", "pc", "wavefronts", "ideal_wavefronts", "source"]
    pd.testing.assert_frame_equal(a[columns], b[columns])
    assert set(a.calls) == {3}                                  # two warm-up launches and the profiled one


def _cases():
    for log in LOGS:
        for case, index, record in profiled():
            marks = [pytest.mark.xfail(strict=True, reason=GAPS[case])] if case in GAPS else []
            yield pytest.param(log, index, record, id=f"{log}-{index}-{record['kernel'][:40]}", marks=marks)


@pytest.mark.parametrize("log,index,record", list(_cases()))
def test_harvested_wavefronts_equal_the_source_page_pc_by_pc(log, index, record):
    from test_hw_families import LSU_KINDS, kind_of
    from test_triton_families import per_pc, unresolved
    rows = rows_of(harvested(log), record)
    assert len(rows), "the profiled launch is harvested"
    assert not unresolved(rows)
    measured = page(index)
    lsu = {pc for pc, row in measured.items() if kind_of(row["Source"]) in LSU_KINDS}
    wavefronts, ideal = per_pc(rows)
    assert set(wavefronts) <= set(measured), "every analysed pc is on the page"
    assert any(wavefronts.values()), "the launch accesses shared memory"
    assert {pc: wavefronts[pc] for pc in lsu} == {pc: int(measured[pc]["L1 Wavefronts Shared"] or 0) for pc in lsu}
    assert {pc: ideal[pc] for pc in lsu} == {pc: int(measured[pc]["L1 Wavefronts Shared Ideal"] or 0) for pc in lsu}


def test_the_collection_script_switches_recording_on_without_a_gpu(tmp_path):
    """What the GPU machine runs, up to the point it needs the GPU: the recording is switched on first."""
    import os
    import subprocess
    import sys
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "hw" / "triton_record.py"), "run", str(tmp_path)],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert run.returncode == 3, run.stdout + run.stderr
    assert f"'record_launches': '{tmp_path / 'launches.jsonl'}'" in run.stdout and "no GPU" in run.stdout
