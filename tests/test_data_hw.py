"""Data-dependent kernels against the H100 (issue 12): exact with the measured inputs, sound without them.

Every launch of ``tests/fixtures/cuda/kernels.toml`` whose shared addresses depend on data
(``static_addresses = false``) is emulated with exactly the buffers it was measured with
(``--data``); its predicted ld / st / atom wavefronts must equal the hardware counters, at the
PTX level and at the SASS level (what ptxas made of the PTX, where the wavefronts of every
SASS instruction must also equal Nsight Compute's Source page).  Without the data the same
launches must count the accesses whose addresses follow from the thread index alone exactly
and report the rest as unresolved.  The shared-atomic variants of ``atomics2.cu`` are counted
per operation as measured.  Where ptxas leaves the shared accesses as the PTX wrote them, both
levels must see the same accesses.
"""

from __future__ import annotations

import csv
import re
import tomllib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from traceconf.emulate.launch import LaunchRequest
from traceconf.rules import load_rule_set
from traceconf import tools

needs_ptxas = pytest.mark.skipif(
    tools.locate("ptxas") is None or tools.locate("nvdisasm") is None,
    reason="needs ptxas and nvdisasm (CUDA toolkit, or pip install nvidia-cuda-nvcc nvidia-cuda-nvdisasm)")

REPO = Path(__file__).resolve().parents[1]
CUDA = REPO / "tests" / "fixtures" / "cuda"
HW = REPO / "tests" / "data" / "hw"
DTYPES = {"u8": np.uint8, "s16": np.int16, "s32": np.int32, "u32": np.uint32, "f16": np.float16,
          "f32": np.float32, "f64": np.float64, "u64": np.uint64}

with open(CUDA / "kernels.toml", "rb") as handle:
    LAUNCHES = {launch["id"]: launch for launch in tomllib.load(handle)["launch"]}
MEASURED = {row["launch"]: row for row in csv.DictReader(open(HW / "kernels_sm90.csv", newline=""))}
DATA_DEPENDENT = [key for key, launch in LAUNCHES.items() if not launch["static_addresses"]]
#: ptxas fuses the comparator's two 32-bit loads into one LDS.64 (docs/hardware.md): PTX-level ld differs.
FUSED_LOADS = {"datadep_bitonic_sort"}


def buffer_contents(spec: dict) -> np.ndarray:
    """The host contents scripts/validate_hw.py gave the buffer when it was measured."""
    dtype = np.dtype(DTYPES[spec["dtype"]])
    count = spec["buffer_bytes"] // dtype.itemsize
    if spec["init"] == "zeros":
        return np.zeros(count, dtype)
    if spec["init"] == "iota":
        return np.arange(count).astype(dtype)
    if spec["init"] == "random":
        rng = np.random.default_rng(spec["seed"])
        return rng.random(count).astype(dtype) if dtype.kind == "f" else rng.integers(0, spec["high"], count).astype(dtype)
    return np.load(CUDA / spec["npy"], allow_pickle=False).ravel()


def request(launch: dict, directory: Path | None) -> LaunchRequest:
    """The measured launch; with ``directory``, every buffer's contents as --data (.npy files there)."""
    params, data = {}, {}
    for index, spec in enumerate(launch["params"]):
        if "value" in spec:
            params[str(index)] = int(spec["value"])
        elif directory is not None:
            path = directory / f"{launch['id']}_{index}.npy"
            np.save(path, buffer_contents(spec))
            data[str(index)] = str(path)
    return LaunchRequest(block=tuple(launch["block"]), grid=tuple(launch["grid"]), params=params, data=data,
                         dynamic_smem=launch.get("dynamic_shared_bytes", 0))


def predict(launch: dict, directory: Path | None, level: str = "ptx"):
    """The analysis of the measured launch at ``level`` (``sass``: what ptxas -arch=sm_90 made of the PTX) and
    its wavefronts per kind."""
    from traceconf.pipeline import run_file
    path = CUDA / launch["file"].replace(".cu", ".sm_90.ptx")
    done, failed = run_file(path, [re.escape(launch["kernel"])], request(launch, directory),
                                    [load_rule_set("sm_90")], level=level)
    assert not failed, failed[0].error
    (analysis,) = done
    totals = Counter()
    for row in analysis.results.to_pylist():
        totals[row["kind"]] += row["wavefronts"]
    return analysis, totals


def by_pc(analysis) -> Counter:
    """A SASS-level analysis's wavefronts per SASS pc."""
    pc_of = {row["instruction"]: row["pc"] for row in analysis.instructions.to_pylist()}
    wavefronts = Counter()
    for row in analysis.results.to_pylist():
        wavefronts[pc_of[row["instruction"]]] += row["wavefronts"]
    return wavefronts


def assert_per_pc_as_measured(launch_id: str, analysis) -> None:
    """Every SASS instruction's wavefronts equal the Source page's (tests/test_sass_hw.py compares alike)."""
    from test_sass_hw import assert_source_page, sass_module
    launch = LAUNCHES[launch_id]
    rows = sass_module(launch["file"].replace(".cu", "")).instructions_of(launch["kernel"])
    assert_source_page(launch_id, rows, by_pc(analysis))


@pytest.mark.parametrize("launch_id", DATA_DEPENDENT + ["datadep_bitonic_sort"])
def test_exact_with_the_measured_inputs(launch_id, tmp_path):
    launch, measured = LAUNCHES[launch_id], MEASURED[launch_id]
    analysis, totals = predict(launch, tmp_path)
    assert not analysis.unresolved, analysis.unresolved
    assert totals["st"] == int(measured["hw_wf_st"])
    assert totals["atom"] == int(measured["hw_wf_atom"] or 0)
    if launch_id in FUSED_LOADS:
        assert totals["ld"] == 6144                   # two LDS.32 per comparator in PTX, one LDS.64 in SASS
    else:
        assert totals["ld"] == int(measured["hw_wf_ld"])


@needs_ptxas
@pytest.mark.parametrize("launch_id", DATA_DEPENDENT + ["datadep_bitonic_sort"])
def test_exact_at_sass_level_with_the_measured_inputs(launch_id, tmp_path):
    """The SASS the GPU ran, with the buffers it ran on: totals and every pc as measured (the bitonic sort's
    fused LDS.64 included: ld 5504, where the PTX level's two loads per comparator give 6144)."""
    launch, measured = LAUNCHES[launch_id], MEASURED[launch_id]
    analysis, totals = predict(launch, tmp_path, "sass")
    assert analysis.launch["level"] == "sass" and not analysis.unresolved, analysis.unresolved
    assert (totals["ld"], totals["st"], totals["atom"]) == \
        (int(measured["hw_wf_ld"]), int(measured["hw_wf_st"]), int(measured["hw_wf_atom"] or 0))
    assert_per_pc_as_measured(launch_id, analysis)


#: Without data: the accesses whose addresses do not depend on the data, counted exactly (kind -> measured
#: column), and the instructions left unresolved (PTX text fragments).
POSITION_ONLY = {
    "histogram_shared": ({"ld", "st"}, {"atom.shared"}),
    "datadep_hist_skewed": ({"ld", "st"}, {"atom.shared"}),
    "datadep_hist_uniform": ({"ld", "st"}, {"atom.shared"}),
    "gather_shared": ({"st"}, {"ld.shared"}),
    "datadep_gather_transpose": ({"st"}, {"ld.shared"}),
    "datadep_gather_random": ({"st"}, {"ld.shared"}),
}


@pytest.mark.parametrize("launch_id", sorted(POSITION_ONLY))
def test_without_data_the_position_only_accesses_are_exact_and_the_rest_flagged(launch_id):
    launch, measured = LAUNCHES[launch_id], MEASURED[launch_id]
    exact, flagged = POSITION_ONLY[launch_id]
    analysis, totals = predict(launch, None)
    for kind in exact:
        assert totals[kind] == int(measured[f"hw_wf_{kind}"]), kind
    texts = {u["ptx"] for u in analysis.unresolved}
    assert texts and all(any(fragment in text for fragment in flagged) for text in texts), texts


#: the PTX fragments above as SASS opcodes
SASS_FRAGMENTS = {"atom.shared": "ATOMS", "ld.shared": "LDS"}


@needs_ptxas
@pytest.mark.parametrize("launch_id", sorted(POSITION_ONLY))
def test_without_data_at_sass_level_the_position_only_accesses_are_exact_and_the_rest_flagged(launch_id):
    """The default level explores a branch on unknown data as the PTX level does: what the data cannot change
    stays exact at the SASS level too, the rest is unresolved, never guessed."""
    launch, measured = LAUNCHES[launch_id], MEASURED[launch_id]
    exact, flagged = POSITION_ONLY[launch_id]
    analysis, totals = predict(launch, None, level="sass")
    assert analysis.launch["level"] == "sass"
    for kind in exact:
        assert totals[kind] == int(measured[f"hw_wf_{kind}"]), kind
    texts = {u["ptx"] for u in analysis.unresolved}
    assert texts and all(any(SASS_FRAGMENTS[f] in text for f in flagged) for text in texts), texts


def test_key_scatter_without_data_counts_the_fill_and_read_back(tmp_path):
    analysis, totals = predict(LAUNCHES["datadep_key_scatter"], None)
    # slot[i] = ~0 and out[i] = slot[i] follow from i; slot[key[i]] = i does not
    assert totals["ld"] == int(MEASURED["datadep_key_scatter"]["hw_wf_ld"])
    assert [u["ptx"].split()[0] for u in analysis.unresolved] == ["st.shared.u32"]
    assert totals["st"] < int(MEASURED["datadep_key_scatter"]["hw_wf_st"])


ATOMIC_LAUNCHES = [key for key, launch in LAUNCHES.items() if launch["file"] == "atomics2.cu"]
#: ptxas turns these into LDS.64 + an ATOMS.CAST.SPIN.64 retry loop, which only the SASS level runs.
SPIN = {key for key in ATOMIC_LAUNCHES if key.startswith("atom64_") and key.split("_")[1] in
        ("add", "min", "max", "and", "or")}


@pytest.mark.parametrize("launch_id", ATOMIC_LAUNCHES)
def test_shared_atomic_variants_are_counted_as_measured(launch_id, tmp_path):
    analysis, totals = predict(LAUNCHES[launch_id], tmp_path)
    if launch_id in SPIN:
        assert any("ATOMS.CAST.SPIN.64" in u["reason"] for u in analysis.unresolved)
        return
    assert not analysis.unresolved, analysis.unresolved
    assert totals["atom"] == int(MEASURED[launch_id]["hw_wf_atom"])


@needs_ptxas
@pytest.mark.parametrize("launch_id", ATOMIC_LAUNCHES)
def test_shared_atomic_variants_with_data_at_sass_level_are_exact(launch_id, tmp_path):
    """With --data, shared memory holds values at the SASS level and every ATOMS returns the old value: the
    counts stay the measured ones, every pc (the 64-bit atomics' CAS loops included)."""
    analysis, totals = predict(LAUNCHES[launch_id], tmp_path, "sass")
    assert not analysis.unresolved, analysis.unresolved
    measured = MEASURED[launch_id]
    assert (totals["ld"], totals["st"], totals["atom"]) == \
        (int(measured["hw_wf_ld"]), int(measured["hw_wf_st"]), int(measured["hw_wf_atom"] or 0))
    assert_per_pc_as_measured(launch_id, analysis)


# --------------------------------------------------------------------------- PTX level vs SASS level

EMULATE = REPO / "tests" / "fixtures" / "emulate"


def _accesses(analysis) -> Counter:
    """Every retained warp execution as (CTA, warp, kind, bytes, operation, lane addresses), counted."""
    acc = analysis.accesses[32]
    assert analysis.complete
    return Counter(zip(acc.cta.tolist(), acc.warp.tolist(), acc.kind.tolist(), acc.bytes.tolist(), acc.op.tolist(),
                       map(tuple, acc.address.tolist())))


def _levels_agree(path: Path, kernel: str, launch: LaunchRequest) -> None:
    from traceconf.pipeline import run_file
    analyses = {}
    for level in ("ptx", "sass"):
        done, failed = run_file(path, [re.escape(kernel)], launch, [load_rule_set("sm_90")], level=level)
        assert not failed, failed[0].error
        analyses[level] = done[0]
    ptx, sass = analyses["ptx"], analyses["sass"]
    assert sass.launch["level"] == "sass" and not ptx.unresolved and not sass.unresolved
    assert _accesses(ptx) and _accesses(ptx) == _accesses(sass)
    totals = {}
    for level, analysis in analyses.items():
        totals[level] = Counter()
        for row in analysis.results.to_pylist():
            totals[level][row["kind"]] += np.array([row["executions"], row["wavefronts"], row["ideal_wavefronts"]])
    assert {k: v.tolist() for k, v in totals["ptx"].items()} == {k: v.tolist() for k, v in totals["sass"].items()}


def _unfused_data_launches() -> list[str]:
    """The data-dependent launches whose kernels ptxas leaves with the PTX's shared accesses (computed from the
    measured SASS listings: tests/test_hw_validation.py)."""
    from test_hw_validation import rewritten_kernels
    rewritten = rewritten_kernels()
    return [key for key in DATA_DEPENDENT + ["datadep_bitonic_sort"] if LAUNCHES[key]["kernel"] not in rewritten]


@needs_ptxas
@pytest.mark.parametrize("launch_id", _unfused_data_launches())
def test_ptx_and_sass_levels_agree_with_data(launch_id, tmp_path):
    launch = LAUNCHES[launch_id]
    _levels_agree(CUDA / launch["file"].replace(".cu", ".sm_90.ptx"), launch["kernel"], request(launch, tmp_path))


@needs_ptxas
@pytest.mark.parametrize("seed", [0, 3])
def test_levels_agree_on_a_swap_under_a_branch_on_the_keys(seed):
    """bitonic_swap.cu swaps under ``if (keys[a] > keys[b])``: ptxas guards the swap's LDS/STS with the
    comparison; both levels run the sort on the same sample keys."""
    _levels_agree(EMULATE / "bitonic_swap.ptx", "_Z19bitonic_swap_sharedPKjS0_PjS1_",
                  LaunchRequest(block=(512, 1, 1), data={"0": "random:u32:1024:0:4096", "1": "random:u32:1024"},
                                seed=seed))


@needs_ptxas
def test_levels_agree_on_ctas_taking_a_global_spin_lock(tmp_path):
    """spin_lock.cu: ATOMG.E.CAS / ATOMG.E.EXCH on a lock, a counter bumped under it; every CTA, in launch order."""
    np.save(tmp_path / "lock.npy", np.zeros(1, np.int32))
    np.save(tmp_path / "counter.npy", np.zeros(33, np.int32))
    launch = LaunchRequest(block=(32, 1, 1), grid=(6, 1, 1),
                           data={"0": str(tmp_path / "lock.npy"), "1": str(tmp_path / "counter.npy")})
    _levels_agree(EMULATE / "spin_lock.ptx", "_Z9spin_lockPiS_", launch)
