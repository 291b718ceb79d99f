"""SASS-level prediction vs. the H100 hardware counters: every launch, totals and per SASS instruction.

Each fixture's committed ``.sm_90.ptx`` is assembled with ptxas (``-arch=sm_90
-lineinfo``, as the measured binaries were), disassembled, emulated at SASS
level with the measured launch and run through the sm_90 rule set.  The
totals must equal ``hw_wf_ld``/``hw_wf_st`` of ``tests/data/hw/kernels_sm90.csv``
for every launch with static addresses, including the kernels ptxas
rewrote (the PTX-level test has to skip those), and the wavefronts of every
SASS instruction must equal the "L1 Wavefronts Shared" column of Nsight
Compute's Source page (``tests/data/hw/source_sm90/ID.csv``, matched by pc),
whose SASS text must be the text we emulated.  Launches whose addresses
depend on loaded data must come back unresolved.
"""

from __future__ import annotations

import csv
import re
import tomllib
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

from traceconf.analyses.results import kernel_table
from traceconf.kinds import UNCOUNTED

from traceconf.emulate import Launch
from traceconf.emulate.launch import resolve_launch
from traceconf.engine import analyze, summarize
from traceconf.rules import load_rule_set
from traceconf import tools

REPO = Path(__file__).resolve().parents[1]
CUDA = REPO / "tests" / "fixtures" / "cuda"
HW = REPO / "tests" / "data" / "hw"

pytestmark = pytest.mark.skipif(
    tools.locate("ptxas") is None or tools.locate("nvdisasm") is None,
    reason="needs ptxas and nvdisasm (CUDA toolkit, or pip install nvidia-cuda-nvcc nvidia-cuda-nvdisasm)")

#: The launches ptxas rewrote (fused shared accesses): exact at SASS level, skipped at PTX level.
REWRITTEN_BY_PTXAS = {"two_per_thread_interleaved", "matmul_tiled_16", "matmul_tiled_32"}


@lru_cache(maxsize=None)
def sass_module(stem: str):
    from traceconf.programs.sass import assemble_ptx
    return assemble_ptx(CUDA / f"{stem}.sm_90.ptx", "sm_90")[0]


def _cases():
    from test_hw_validation import _launch_params
    launches = tomllib.load(open(CUDA / "kernels.toml", "rb"))["launch"]
    measured = {row["launch"]: row for row in csv.DictReader(open(HW / "kernels_sm90.csv"))}
    for launch in launches:
        yield pytest.param(launch, _launch_params(launch["params"]), measured[launch["id"]], id=launch["id"])


@lru_cache(maxsize=None)
def _predict(launch_id: str):
    from test_hw_validation import _launch_params
    launch = next(item for item in tomllib.load(open(CUDA / "kernels.toml", "rb"))["launch"]
                  if item["id"] == launch_id)
    from traceconf.sass.emulate import emulate_sass
    module = sass_module(launch["file"].replace(".cu", ""))
    emulation = emulate_sass(module, launch["kernel"], resolve_launch(Launch(
        block=tuple(launch["block"]), grid=tuple(launch["grid"]), params=_launch_params(launch["params"]),
        dynamic_smem=launch.get("dynamic_shared_bytes", 0)), module.kernel(launch["kernel"])))
    results = summarize(analyze(emulation.accesses, load_rule_set("sm_90")), scale=emulation.scale or 1)
    rows = {row["instruction"]: row for row in module.instructions_of(launch["kernel"])}
    return launch, emulation, results.to_pylist(), rows


@pytest.mark.parametrize("launch, params, measured", list(_cases()))
def test_sass_level_totals_equal_the_hardware_counters(launch, params, measured):
    _, emulation, results, _ = _predict(launch["id"])
    if not launch["static_addresses"]:
        assert emulation.unresolved, "data-dependent addresses must be reported unresolved, never guessed"
        return
    assert not emulation.unresolved, emulation.unresolved
    totals = Counter()
    for row in results:
        totals[{"ldmatrix": "ld", "stmatrix": "st"}.get(row["kind"], row["kind"])] += row["wavefronts"]
    assert (totals["ld"], totals["st"]) == (int(measured["hw_wf_ld"]), int(measured["hw_wf_st"]))


def _source_page(launch_id: str, column: str = "L1 Wavefronts Shared") -> dict[int, tuple[str, int]]:
    """pc -> (SASS text, counter) of Nsight Compute's Source page export."""
    rows = list(csv.reader(open(HW / "source_sm90" / f"{launch_id}.csv")))
    body = [dict(zip(rows[1], r)) for r in rows[2:]]
    base = int(body[0]["Address"], 16)
    return {int(r["Address"], 16) - base: (r["Source"], int(r[column] or 0)) for r in body}


def _normalise(text: str, base: int = 0) -> str:
    """SASS text without .reuse, spacing, and absolute branch targets (the Source page prints addresses)."""
    text = re.sub(r"\.reuse", "", text)
    return " ".join(text.replace(",", " ").split())


@pytest.mark.parametrize("launch, params, measured", [c for c in _cases() if c.values[0]["static_addresses"]])
def test_per_sass_instruction_wavefronts_equal_the_source_page(launch, params, measured):
    _, emulation, results, rows = _predict(launch["id"])
    predicted = Counter()
    for row in results:
        predicted[rows[row["instruction"]]["pc"]] += row["wavefronts"]
    assert_source_page(launch["id"], list(rows.values()), predicted)


def assert_source_page(launch_id: str, rows: list[dict], predicted: Counter) -> None:
    """Predicted wavefronts per pc (``predicted``) equal the Source page's "L1 Wavefronts Shared" of every pc, and
    the page lists exactly the kernel's instructions (``rows``), with the SASS text we emulated."""
    page = _source_page(launch_id)
    by_pc = {row["pc"]: row for row in rows}
    assert sorted(page) == sorted(by_pc), "the Source page lists the instructions we emulated"
    for pc, (text, _) in page.items():
        assert _normalise(text).split()[:1] == _normalise(by_pc[pc]["text"]).split()[:1] or \
            _normalise(text).split()[1:2] == _normalise(by_pc[pc]["text"]).split()[:1], (hex(pc), text)
    measured_by_pc = {pc: wavefronts for pc, (_, wavefronts) in page.items() if wavefronts}
    assert {pc: n for pc, n in predicted.items() if n} == measured_by_pc


@pytest.mark.parametrize("launch, params, measured", [c for c in _cases() if c.values[0]["static_addresses"]])
def test_per_sass_instruction_ideal_and_excess_equal_the_source_page(launch, params, measured):
    """Nsight's "L1 Wavefronts Shared Ideal" of every pc, and so its excess (wavefronts - ideal): the
    partly active LDS.64 and the ATOMS.CAST.SPIN.64 of the 64-bit CAS loops (ideal = the wavefronts the
    active lanes' bytes fill) and the paired LDS.128 of ldgsts_multistage_matmul that still conflicts
    (ideal 4, not its 2 paired groups) included."""
    _, emulation, results, rows = _predict(launch["id"])
    predicted, ideal = Counter(), Counter()
    for row in results:
        predicted[rows[row["instruction"]]["pc"]] += row["wavefronts"]
        ideal[rows[row["instruction"]]["pc"]] += row["ideal_wavefronts"]
    measured_ideal = {pc: n for pc, (_, n) in _source_page(launch["id"], "L1 Wavefronts Shared Ideal").items() if n}
    assert {pc: n for pc, n in ideal.items() if n} == measured_ideal
    excess = {pc: n for pc, (_, n) in _source_page(launch["id"], "L1 Wavefronts Shared Excessive").items() if n}
    assert {pc: predicted[pc] - ideal[pc] for pc in predicted if predicted[pc] > ideal[pc]} == excess


def test_the_conflict_free_multistage_matmul_passes_the_excess_gate():
    """Nsight finds no excess in ldgsts_multistage_matmul: ``--fail-on-excess 0`` must pass it."""
    from typer.testing import CliRunner
    from traceconf.cli import app
    launch = next(item for item in tomllib.load(open(CUDA / "kernels.toml", "rb"))["launch"]
                  if item["id"] == "ldgsts_multistage_matmul")
    result = CliRunner().invoke(app, [
        "analyze", str(CUDA / "ldgsts.sm_90.ptx"), "-k", launch["kernel"], "--level", "sass", "-d", "sm_90",
        "--block", ",".join(map(str, launch["block"])), "--grid", ",".join(map(str, launch["grid"])),
        "-p", "3=256", "-f", "json", "--fail-on-excess", "0"])
    assert result.exit_code == 0, result.output


def test_the_ptxas_rewrites_are_explained_and_exact():
    """The launches the PTX level must skip: fused accesses, each explained in one line."""
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.pipeline import run_file
    from test_hw_validation import _launch_params

    for launch in tomllib.load(open(CUDA / "kernels.toml", "rb"))["launch"]:
        if launch["id"] not in REWRITTEN_BY_PTXAS:
            continue
        done, failed = run_file(
            CUDA / launch["file"].replace(".cu", ".sm_90.ptx"), [re.escape(launch["kernel"])],
            LaunchRequest(block=tuple(launch["block"]), grid=tuple(launch["grid"]),
                          params=_launch_params(launch["params"])), [load_rule_set("sm_90")], level="sass")
        assert not failed
        (analysis,) = done
        fused = [note for note in analysis.notes if "ptxas fused" in note]
        assert fused, analysis.notes
        expected = "into STS.64" if "interleaved" in launch["id"] else "4 ld.shared.f32"
        assert any(expected in note for note in fused), fused


# --------------------------------------------------------------------------- Triton kernels (PTX for sm_90a)

TRITON = REPO / "tests" / "fixtures" / "triton"
#: LDGSTS pcs per Triton kernel whose Source page count exceeds their ideal: the A-operand copies of the main loop
#: (2 per iteration in tt_matmul, 4 in tt_matmul_mma2), which Nsight counts from their global source lines
#: (tests/test_ldgsts_probe_hw.py, tests/test_ldgsts_ignore_src_hw.py); in tt_matmul behind ``!P0`` (P0 read as
#: false: every lane reads), which the PTX level cannot know.
UNPREDICTABLE_COPIES = {"tt_matmul": 2, "tt_matmul_mma2": 4}
#: Per Triton matmul, its copies whose ignore-src predicate ptxas put on a register other than P0 (tt_matmul_mma2's
#: main loop, ``!P1``): the PTX level counts them as the SASS level and the page.
COPIES_OFF_P0 = {"tt_matmul": 0, "tt_matmul_mma2": 8}


def _triton_cases():
    import json
    measured = {row["launch"]: row for row in csv.DictReader(open(HW / "triton_sm90.csv"))}
    for spec_path in sorted(TRITON.glob("*.json")):
        spec = json.loads(spec_path.read_text())
        yield pytest.param(spec, measured[spec["id"]], id=spec["id"])


@lru_cache(maxsize=None)
def _triton_analysis(spec_id: str):
    import json
    from test_hw_validation import _launch_params
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.pipeline import run_file
    spec = json.loads((TRITON / f"{spec_id}.json").read_text())
    done, failed = run_file(
        TRITON / spec["ptx"], [re.escape(spec["kernel"])],
        LaunchRequest(block=tuple(spec["block"]), grid=tuple(spec["grid"]), params=_launch_params(spec["params"]),
                      dynamic_smem=spec.get("shared_bytes", 0)), [load_rule_set("sm_90")], level="sass")
    assert not failed, failed[0].error
    return done[0]


@pytest.mark.parametrize("spec, measured", list(_triton_cases()))
def test_triton_kernels_at_sass_level_equal_the_hardware(spec, measured):
    """Triton PTX targets sm_90a: ptxas assembles it for sm_90a; totals and per-pc wavefronts are exact."""
    analysis = _triton_analysis(spec["id"])
    uncounted = set(UNCOUNTED.values())          # HGMMA operand reads: named, not counted
    assert analysis.launch["arch"] == "sm_90a" and not [u for u in analysis.unresolved if u["reason"] not in uncounted]
    totals = Counter()
    for row in analysis.results.to_pylist():
        totals[{"ldmatrix": "ld", "stmatrix": "st"}.get(row["kind"], row["kind"])] += row["wavefronts"]
    assert (totals["ld"], totals["st"]) == (int(measured["hw_wf_ld"]), int(measured["hw_wf_st"]))
    pc_of = {row["instruction"]: row["pc"] for row in analysis.instructions.to_pylist()}
    predicted, copies = Counter(), set()
    for row in analysis.results.to_pylist():
        predicted[pc_of[row["instruction"]]] += row["wavefronts"]
        if row["kind"] == "cp_async":
            copies.add(pc_of[row["instruction"]])
    page = _source_page(f"triton_{spec['id']}")
    ideal = _source_page(f"triton_{spec['id']}", "L1 Wavefronts Shared Ideal")
    # HGMMA reads shared memory through matrix descriptors (no per-lane addresses): not predicted.
    shared_only = {pc: n for pc, (text, n) in page.items() if n and "GMMA" not in text and pc not in copies}
    assert {pc: n for pc, n in predicted.items() if n and pc not in copies} == shared_only
    # LDGSTS.BYPASS (cp.async.cg, XOR-swizzled destinations): the prologue's ``..., P0`` copies count as no
    # lane reading (Nsight reads P0 as false): 4 per warp from the shared addresses; the main loop's ``!P0`` /
    # ``!P1`` copies with every lane reading count from their global sources (8.0 and 7.5 per warp for the A
    # copies, docs/hardware.md "LDGSTS ignore-src probes"); every copy's result carries a model note.
    assert all(row["model_note"] for row in kernel_table(analysis, "sm_90").to_pylist() if row["kind"] == "cp_async")
    assert {pc: predicted[pc] for pc in copies} == {pc: page[pc][1] for pc in copies}
    assert len({pc for pc in copies if page[pc][1] > ideal[pc][1]}) == UNPREDICTABLE_COPIES.get(spec["id"], 0)


@pytest.mark.parametrize("spec, measured", list(_triton_cases()))
def test_triton_kernels_ideal_per_pc_equals_the_source_page(spec, measured):
    """Nsight's ideal at every pc of the Triton kernels' pages (HGMMA aside: descriptors, no lane addresses)."""
    analysis = _triton_analysis(spec["id"])
    pc_of = {row["instruction"]: row["pc"] for row in analysis.instructions.to_pylist()}
    ideal = Counter()
    for row in analysis.results.to_pylist():
        ideal[pc_of[row["instruction"]]] += row["ideal_wavefronts"]
    page = _source_page(f"triton_{spec['id']}", "L1 Wavefronts Shared Ideal")
    assert {pc: n for pc, n in ideal.items() if n} == {pc: n for pc, (text, n) in page.items()
                                                       if n and "GMMA" not in text}


@pytest.mark.parametrize("spec, measured", [c for c in _triton_cases() if "matmul" in c.id])
def test_ptx_level_copies_equal_the_sass_level_off_p0_on_the_triton_matmuls(spec, measured):
    """Triton's ``cp.async.cg ... 16, %r`` with ``%r = selp 16, 0``: the PTX level records each lane's src-size and
    counts the copies from their sources and fill pass, as the SASS level does wherever ptxas put the ignore-src
    predicate on a register other than P0; on P0 Nsight reads it as false, which the PTX level cannot know: the
    notes say so."""
    import json
    from test_hw_validation import _launch_params
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.pipeline import run_file
    spec = json.loads((TRITON / f"{spec['id']}.json").read_text())
    (ptx,), failed = run_file(TRITON / spec["ptx"], [re.escape(spec["kernel"])], LaunchRequest(
        block=tuple(spec["block"]), grid=tuple(spec["grid"]), params=_launch_params(spec["params"]),
        dynamic_smem=spec.get("shared_bytes", 0)), [load_rule_set("sm_90")], level="ptx")
    assert not failed
    line_of = {row["instruction"]: row["ptx_line"] for row in ptx.instructions.to_pylist()}
    counted = {line_of[r["instruction"]]: (r["wavefronts"], ptx.model_notes["sm_90"][r["instruction"]])
               for r in ptx.results.to_pylist() if r["kind"] == "cp_async"}
    sass = _triton_analysis(spec["id"])
    info = {row["instruction"]: row for row in sass.instructions.to_pylist()}
    copies = [(info[r["instruction"]], r["wavefronts"]) for r in sass.results.to_pylist() if r["kind"] == "cp_async"]
    assert copies and {row["ptx_line"] for row, _ in copies} == set(counted)
    on_p0 = [(row, n) for row, n in copies if row["text"].rstrip(" ;").endswith("P0")]
    off_p0 = [(row, n) for row, n in copies if (row, n) not in on_p0]
    assert {row["pc"]: counted[row["ptx_line"]][0] for row, _ in off_p0} == {row["pc"]: n for row, n in off_p0}
    assert len(off_p0) == COPIES_OFF_P0[spec["id"]]
    assert all("ignore-src operand on P0" in counted[row["ptx_line"]][1] for row, _ in on_p0)


def test_only_the_rewritten_launches_get_rewrite_explanations():
    """No spurious 'ptxas fused/split/removed' line on a launch whose SASS keeps the PTX accesses."""
    from test_hw_validation import _launch_params
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.pipeline import run_file

    explained = set()
    for launch in tomllib.load(open(CUDA / "kernels.toml", "rb"))["launch"]:
        done, _ = run_file(
            CUDA / launch["file"].replace(".cu", ".sm_90.ptx"), [re.escape(launch["kernel"])],
            LaunchRequest(block=tuple(launch["block"]), grid=tuple(launch["grid"]),
                          params=_launch_params(launch["params"]), dynamic_smem=launch.get("dynamic_shared_bytes", 0)),
            [load_rule_set("sm_90")], level="sass")
        if any(re.search(r"ptxas (fused|split|removed)", note) for note in done[0].notes):
            explained.add(launch["id"])
    for spec in _triton_cases():
        if any(re.search(r"ptxas (fused|split|removed)", n) for n in _triton_analysis(spec.values[0]["id"]).notes):
            explained.add(spec.values[0]["id"])
    from test_hw_validation import rewritten_kernels
    launches = tomllib.load(open(CUDA / "kernels.toml", "rb"))["launch"]
    may = {launch["id"] for launch in launches if launch["kernel"] in rewritten_kernels()}
    assert REWRITTEN_BY_PTXAS <= explained <= may | REWRITTEN_BY_PTXAS
