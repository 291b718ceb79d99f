"""sm_90 against the H200 hardware counters of ../shared/hw/sm90_patterns.csv (bank_rules.md §4.3).

The rule set reproduces the hardware (l1tex__*) counter family; the SASS-instrumented
smsp__sass_* counters are Nsight's software model and differ in three LDS.128 rows.
Normalisation per ../shared/hw/README.md: divide by the executed instructions of the kind.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from conftest import shared_path

from test_engine import accesses_of
from traceconf.engine import count_wavefronts
from traceconf.rules import load_rule_set

#: README kind code -> (access kind, bytes per lane, matrices, wavefront column, conflict column, divisor column)
KINDS = {
    0: ("ld", 1, 0, "hw_wf_ld", "hw_bc_ld", "inst_ld"),
    1: ("ld", 2, 0, "hw_wf_ld", "hw_bc_ld", "inst_ld"),
    2: ("ld", 4, 0, "hw_wf_ld", "hw_bc_ld", "inst_ld"),
    3: ("ld", 8, 0, "hw_wf_ld", "hw_bc_ld", "inst_ld"),
    4: ("ld", 16, 0, "hw_wf_ld", "hw_bc_ld", "inst_ld"),
    5: ("st", 4, 0, "hw_wf_st", "hw_bc_st", "inst_st"),
    6: ("st", 8, 0, "hw_wf_st", "hw_bc_st", "inst_st"),
    7: ("st", 16, 0, "hw_wf_st", "hw_bc_st", "inst_st"),
    8: ("ldmatrix", 16, 1, "hw_wf_ld", "hw_bc_ld", "inst_ldsm"),
    9: ("ldmatrix", 16, 2, "hw_wf_ld", "hw_bc_ld", "inst_ldsm"),
    10: ("ldmatrix", 16, 4, "hw_wf_ld", "hw_bc_ld", "inst_ldsm"),
    11: ("ldmatrix", 16, 1, "hw_wf_ld", "hw_bc_ld", "inst_ldsm"),      # .trans
    12: ("ldmatrix", 16, 4, "hw_wf_ld", "hw_bc_ld", "inst_ldsm"),      # .trans
    13: ("stmatrix", 16, 1, "hw_wf_st", "hw_bc_st", None),             # 8 stmatrix per launch (README)
    14: ("stmatrix", 16, 4, "hw_wf_st", "hw_bc_st", None),
    15: ("stmatrix", 16, 4, "hw_wf_st", "hw_bc_st", None),             # .trans
    # cp.async.ca 4/8 B: no hardware wavefront column; the README takes sass_wf_ldgsts for wavefronts.
    16: ("cp_async", 4, 0, "sass_wf_ldgsts", "hw_bc_ldgsts", "inst_ldgsts"),
    17: ("cp_async", 8, 0, "sass_wf_ldgsts", "hw_bc_ldgsts", "inst_ldgsts"),
}
CP_ASYNC_CG_16 = 18
#: The l1tex bank-conflict counters count excess against the active lane groups, the Source page against the
#: bytes (builtin sm_90, ideal = "bytes"): these counters are judged with ideal = "groups".
SM90 = load_rule_set(str(Path(__file__).parent / "fixtures" / "rules" / "sm_90_l1tex_counters.toml"))


def _patterns() -> list[dict]:
    with open(shared_path("hw", "sm90_patterns.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["offsets"] = [int(x) for x in row["offsets"].split()]
        row["kind"] = int(row["kind"])
    return rows


def _model(rows: list[dict], kind_of, op: str = "") -> tuple[np.ndarray, np.ndarray]:
    wavefronts, ideal, _ = count_wavefronts(accesses_of([(*kind_of(r), r["offsets"], op) for r in rows]), SM90)
    return wavefronts, wavefronts - ideal


def _per_instruction(row: dict, column: str, divisor: str | None) -> float:
    return int(row[column]) / (int(row[divisor]) if divisor else 8)


def test_all_108_hardware_counter_rows_are_reproduced():
    rows = [r for r in _patterns() if r["kind"] != CP_ASYNC_CG_16]
    assert len(rows) == 108
    wavefronts, conflicts = _model(rows, lambda r: KINDS[r["kind"]][:3])
    mismatches = []
    for row, wf, bc in zip(rows, wavefronts, conflicts):
        _, _, _, wf_column, bc_column, divisor = KINDS[row["kind"]]
        measured = (_per_instruction(row, wf_column, divisor), _per_instruction(row, bc_column, divisor))
        if measured != (wf, bc):
            mismatches.append(f"{row['case']}: hardware {measured}, model {(int(wf), int(bc))}")
    assert not mismatches, "\n".join(mismatches)


def test_hardware_not_the_sass_software_model_is_the_judge():
    """The three LDS.128 pairing corner cases where the two counter families disagree (README caveat 3)."""
    rows = {r["case"]: r for r in _patterns()}
    cases = ["lds128_oddactive", "lds128_pair1_onebroken", "lds128_pair1_half"]
    wavefronts, _ = _model([rows[c] for c in cases], lambda r: KINDS[r["kind"]][:3])
    assert [int(rows[c]["hw_wf_ld"]) for c in cases] == wavefronts.tolist() == [2, 5, 4]
    assert [int(rows[c]["sass_wf_ld"]) for c in cases] == [3, 4, 3]


# --- cp.async.cg 16 B: invisible to the hardware counters (bank_rules.md §4.3 rule 7), kept apart --------------

def test_cp_async_without_an_operation_is_analysed_as_sts128():
    """A copy whose form is unknown (``op`` empty) or .ca 16 B: the STS.128 rule (cp16ca_* in test_sm90_hw_extra)."""
    rows = [r for r in _patterns() if r["kind"] == CP_ASYNC_CG_16]
    assert len(rows) == 10
    as_cp_async = _model(rows, lambda r: ("cp_async", 16, 0))
    as_store = _model(rows, lambda r: ("st", 16, 0))
    assert np.array_equal(as_cp_async[0], as_store[0]) and np.array_equal(as_cp_async[1], as_store[1])


def test_cp_async_cg_16_placements_give_nsights_software_model():
    """sm_90 [copy_ops.bypass]: one wavefront per distinct (row, chunk XOR lane position) placement of each
    quarter-warp's destinations: 9 of the 10 rows.  cp16_misaligned_row (every chunk one place on, the last
    into the next row) is the miss: Nsight 12 per instruction, the placements 16 (docs/rules.md)."""
    rows = [r for r in _patterns() if r["kind"] == CP_ASYNC_CG_16]
    wavefronts, _ = _model(rows, lambda r: ("cp_async", 16, 0), op="bypass")
    measured = [int(r["sass_wf_ldgsts"]) / int(r["inst_ldgsts"]) for r in rows]
    misses = {r["case"]: (m, int(w)) for r, m, w in zip(rows, measured, wavefronts) if m != w}
    assert misses == {"cp16_misaligned_row": (12, 16)}


def test_cp_async_cg_16_from_their_sources_gives_nsights_software_model_everywhere():
    """The same 10 rows with their global sources (the H200 kernel's lane l reads 16*l bytes in: one aligned
    line per quarter-warp) counted by sm_90's ``source_passes`` rule: all 10, cp16_misaligned_row included."""
    rows = [r for r in _patterns() if r["kind"] == CP_ASYNC_CG_16]
    sources = [16 * lane for lane in range(32)]
    wavefronts, _, _ = count_wavefronts(accesses_of([("cp_async", 16, 0, r["offsets"], "bypass", sources)
                                                     for r in rows]), load_rule_set("sm_90"))
    assert wavefronts.tolist() == [int(r["sass_wf_ldgsts"]) / int(r["inst_ldgsts"]) for r in rows]
