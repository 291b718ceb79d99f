"""Data-dependent kernels against the H100 (issue 12): exact with the measured inputs, sound without them.

Every launch of ``tests/fixtures/cuda/kernels.toml`` whose shared addresses depend on data
(``static_addresses = false``) is emulated with exactly the buffers it was measured with
(``--data``); its predicted ld / st / atom wavefronts must equal the hardware counters.
Without the data the same launches must count the accesses whose addresses follow from
the thread index alone exactly and report the rest as unresolved.  The shared-atomic
variants of ``atomics2.cu`` are counted per operation as measured.
"""

from __future__ import annotations

import csv
import re
import tomllib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from traceconf.pipeline import LaunchRequest, run_ptx
from traceconf.rules import load_rule_set

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


def predict(launch: dict, directory: Path | None):
    path = CUDA / launch["file"].replace(".cu", ".sm_90.ptx")
    done, failed = run_ptx(path, [re.escape(launch["kernel"])], request(launch, directory), [load_rule_set("sm_90")])
    assert not failed, failed[0].error
    (analysis,) = done
    totals = Counter()
    for row in analysis.results.to_pylist():
        totals[row["kind"]] += row["wavefronts"]
    return analysis, totals


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
