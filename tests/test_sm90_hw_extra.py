"""sm_90 against the H100 counters of tests/data/hw/sm90_patterns_extra.csv and the atomic launches of
tests/data/hw/kernels_sm90.csv (docs/hardware.md).

Every pattern launch executes one instruction, so each counter is a per-instruction value.  Wavefronts
come from the hardware counter of the kind (ld/st/atom); cp.async.ca has no hardware wavefront column,
so (as for ../shared/hw) its wavefronts are ``sass_wf_ldgsts`` and its conflicts the hardware
``hw_bc_ldgsts``.  Rows the ACCESSES schema cannot express are tested apart, below the line.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from test_engine import accesses_of
from traceconf.engine import count_wavefronts
from traceconf.rules import load_rule_set
from traceconf.schemas import OP_CODES

DATA = Path(__file__).parent / "data" / "hw"
#: The l1tex bank-conflict counters count excess against the active lane groups, the Source page against the
#: bytes (builtin sm_90, ideal = "bytes"): these counters are judged with ideal = "groups".
SM90 = load_rule_set(str(Path(__file__).parent / "fixtures" / "rules" / "sm_90_l1tex_counters.toml"))

#: kind code -> (access kind, bytes per lane, matrices, wavefront column, conflict column)
KINDS = {
    0: ("ld", 1, 0, "hw_wf_ld", "hw_bc_ld"),
    1: ("ld", 2, 0, "hw_wf_ld", "hw_bc_ld"),
    2: ("ld", 4, 0, "hw_wf_ld", "hw_bc_ld"),
    3: ("ld", 8, 0, "hw_wf_ld", "hw_bc_ld"),
    4: ("ld", 16, 0, "hw_wf_ld", "hw_bc_ld"),
    5: ("st", 4, 0, "hw_wf_st", "hw_bc_st"),
    7: ("st", 16, 0, "hw_wf_st", "hw_bc_st"),
    9: ("ldmatrix", 16, 2, "hw_wf_ld", "hw_bc_ld"),
    10: ("ldmatrix", 16, 4, "hw_wf_ld", "hw_bc_ld"),
    16: ("cp_async", 4, 0, "sass_wf_ldgsts", "hw_bc_ldgsts"),
    17: ("cp_async", 8, 0, "sass_wf_ldgsts", "hw_bc_ldgsts"),
    19: ("stmatrix", 16, 2, "hw_wf_st", "hw_bc_st"),
    20: ("ldmatrix", 16, 2, "hw_wf_ld", "hw_bc_ld"),          # .trans
    21: ("cp_async", 16, 0, "sass_wf_ldgsts", "hw_bc_ldgsts"),  # .ca: seen by hw_bc_ldgsts, unlike .cg
    22: ("atom", 4, 0, "hw_wf_atom", "hw_bc_atom"),            # atom.shared.add
    23: ("atom", 4, 0, "hw_wf_atom", "hw_bc_atom"),            # red.shared.add
    24: ("st", 2, 0, "hw_wf_st", "hw_bc_st"),
    25: ("st", 1, 0, "hw_wf_st", "hw_bc_st"),
}
#: atom.shared.cas.b32: hardware-visible, but ACCESSES has one kind "atom" for every atomic operation.
ATOM_CAS = 26


def _patterns() -> list[dict]:
    with open(DATA / "sm90_patterns_extra.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["offsets"] = [int(x) for x in row["offsets"].split()]
        row["kind"] = int(row["kind"])
    return rows


def _model(rules, executions: list[tuple]) -> list[tuple[int, int]]:
    wavefronts, ideal, _ = count_wavefronts(accesses_of(executions), rules)
    return list(zip(wavefronts.tolist(), (wavefronts - ideal).tolist()))


def _user_rules(tmp_path, body: str):
    path = tmp_path / "variant.toml"
    path.write_text(f'alias_of = "sm_90"\nname = "variant"\ntitle = "test"\nevidence = "unverified"\n'
                    f'ideal = "groups"\n{body}')          # judged by the l1tex counters, as SM90 here
    return load_rule_set(str(path))


def test_every_hardware_visible_pattern_is_exact():
    rows = [r for r in _patterns() if r["kind"] != ATOM_CAS]
    assert len(rows) == 32 and {r["kind"] for r in rows} == set(KINDS)
    assert all(r[k] in ("0", "1") for r in rows for k in ("inst_ld", "inst_st", "inst_ldsm", "inst_ldgsts"))
    model = _model(SM90, [(*KINDS[r["kind"]][:3], r["offsets"]) for r in rows])
    mismatches = [f"{r['case']}: hardware {(int(r[KINDS[r['kind']][3]]), int(r[KINDS[r['kind']][4]]))}, model {m}"
                  for r, m in zip(rows, model)
                  if m != (int(r[KINDS[r["kind"]][3]]), int(r[KINDS[r["kind"]][4]]))]
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("case, old_rule", [
    ("lds16_stride66", (2, 1)), ("lds8_stride33", (2, 1)),     # §4.3 snippet: span max(width, 4) bytes
    ("atom_add_same", (1, 0)),                                   # atomics merged like stores
])
def test_findings_that_the_previous_rules_got_wrong(case, old_rule):
    """The measured value, and what the superseded rule predicted (not the model now)."""
    row = next(r for r in _patterns() if r["case"] == case)
    kind, nbytes, matrices, wf, bc = KINDS[row["kind"]]
    measured = (int(row[wf]), int(row[bc]))
    assert _model(SM90, [(kind, nbytes, matrices, row["offsets"])]) == [measured] != [old_rule]


def test_sub_word_pieces_are_the_words_they_overlap():
    """Upper halves (bytes 2-3) and last bytes of words 0..31: one word each, 32 banks, 1 wavefront (spanning
    max(width, 4) bytes would also touch word 32, bank 0 again, and count 2)."""
    upper_halves = [4 * lane + 2 for lane in range(32)]
    last_bytes = [4 * lane + 3 for lane in range(32)]
    assert _model(SM90, [("ld", 2, 0, upper_halves), ("st", 2, 0, upper_halves), ("ld", 1, 0, last_bytes),
                         ("st", 1, 0, last_bytes)]) == [(1, 0)] * 4


def test_atomics_do_not_merge_on_every_nvidia_rule_set_from_sm_50():
    same_word = ("atom", 4, 0, [64] * 32)
    for name in ("sm_50", "sm_52", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90",
                 "sm_100", "sm_120"):
        assert _model(load_rule_set(name), [same_word, ("st", 4, 0, [64] * 32)]) == [(32, 31), (1, 0)], name


# --- kernel-level launches (kernels_sm90.csv): atomic_add_stride in atomics.cu -----------------------------

def _launch(name: str) -> dict:
    with open(DATA / "kernels_sm90.csv", newline="") as handle:
        return next(r for r in csv.DictReader(handle) if r["launch"] == name)


@pytest.mark.parametrize("stride", [1, 32, 0])
def test_atomic_add_stride_launches(stride):
    """``atomicAdd(&cells[(tid * stride) % 1024], ...)``, one block of 64 threads: two ATOMS.ADD warps."""
    launch = _launch(f"atomic_add_stride_{stride}")
    executions = [("atom", 4, 0, [4 * ((tid * stride) % 1024) for tid in range(32 * w, 32 * w + 32)])
                  for w in range(2)]
    assert int(launch["inst_atom"]) == len(executions)
    wavefronts, conflicts = np.sum(_model(SM90, executions), axis=0)
    assert (wavefronts, conflicts) == (int(launch["hw_wf_atom"]), int(launch["hw_bc_atom"]))


# ------------------------------------------------------------------------------------------------------------
# Hardware-visible, but NOT expressible in ACCESSES: kind "atom" does not say which atomic operation ran.
# ------------------------------------------------------------------------------------------------------------

def test_atom_cas_is_not_expressible_two_half_warp_phases_fit(tmp_path):
    """ATOMS.CAS on 32 distinct banks: 2 wavefronts, 0 conflicts, so ideal 2 (two phases).  The one row
    fits "CAS moves 8 operand bytes per lane, so half-warp phases like an 8-byte access"; it cannot tell
    that from "every CAS takes two passes" (a half-active warp would).  As "atom" (ATOMS.ADD) the model
    says 1: the row stays unmodelled until ACCESSES distinguishes the operation."""
    row = next(r for r in _patterns() if r["kind"] == ATOM_CAS)
    measured = (int(row["hw_wf_atom"]), int(row["hw_bc_atom"]))
    assert measured == (2, 0) and int(row["sass_wf_atom"]) == 2
    half_warps = 'merge_same_word = { atom = false }\n' + "".join(
        f'[[lane_groups]]\nbytes = {b}\n{k}lanes = {n}\n\n' for b, k, n in
        [([4], 'kinds = ["atom"]\n', 16), ([1, 2, 4], "", 32), ([8], "", 16), ([16], "", 8)])
    assert _model(_user_rules(tmp_path, half_warps), [("atom", 4, 0, row["offsets"])]) == [measured]


def test_histogram_popc_inc_merges_same_word_lanes(tmp_path):
    """histogram_shared: ``atomicAdd(&bins[byte], 1u)`` compiles to ATOMS.POPC.INC, which adds the count of
    lanes per address, so same-word lanes merge: 402 wavefronts over its 128 executions, exactly what the
    merging rule gives (the sm_90 atom rule, measured on ATOMS.ADD, gives 451)."""
    launch = _launch("histogram_shared")
    data = np.random.default_rng(5).integers(0, 256, 4096)      # scripts/validate_hw.py, kernels.toml seed 5
    executions = [("atom", 4, 0, (4 * data[block * 256 + warp * 32 + np.arange(32) + 512 * step]).tolist())
                  for block in range(2) for warp in range(8) for step in range(8)]
    assert int(launch["inst_atom"]) == len(executions) == 128
    measured = (int(launch["hw_wf_atom"]), int(launch["hw_bc_atom"]))
    merging = _user_rules(tmp_path, "[merge_same_word]\natom = true\n")
    assert tuple(np.sum(_model(merging, executions), axis=0)) == measured == (402, 274)


# The operation column of ACCESSES (issue 12): ATOMS.CAS and ATOMS.POPC.INC counted as measured by the sm_90 rules.

def _model_op(rules, executions: list[tuple], op: str) -> list[tuple[int, int]]:
    accesses = accesses_of(executions)
    accesses.op[:] = OP_CODES[op]
    wavefronts, ideal, _ = count_wavefronts(accesses, rules)
    return list(zip(wavefronts.tolist(), (wavefronts - ideal).tolist()))


def test_atom_cas_counts_as_measured():
    row = next(r for r in _patterns() if r["kind"] == ATOM_CAS)
    assert _model_op(SM90, [("atom", 4, 0, row["offsets"])], "cas") == [(int(row["hw_wf_atom"]),
                                                                        int(row["hw_bc_atom"]))]
    assert _model(SM90, [("atom", 4, 0, row["offsets"])]) == [(1, 0)]      # an add on the same lanes


def test_histogram_popc_inc_counts_as_measured():
    launch = _launch("histogram_shared")
    data = np.random.default_rng(5).integers(0, 256, 4096)      # scripts/validate_hw.py, kernels.toml seed 5
    executions = [("atom", 4, 0, (4 * data[block * 256 + warp * 32 + np.arange(32) + 512 * step]).tolist())
                  for block in range(2) for warp in range(8) for step in range(8)]
    measured = (int(launch["hw_wf_atom"]), int(launch["hw_bc_atom"]))
    assert tuple(np.sum(_model_op(SM90, executions, "popc_inc"), axis=0)) == measured
    assert tuple(np.sum(_model(SM90, executions), axis=0)) != measured      # as ATOMS.ADD: 451
