"""The committed sm_90 hardware data are complete and consistent with each other (no GPU needed).

Covers what docs/hardware.md states about the measurements of vectorize.cu, ldgsts.cu,
atomics2.cu and datadep.cu and about kernel_vs_source_sm90.csv: every launch has its
row, source page and SASS; the per-instruction rows add up to the kernel-level counters
as documented; the fusions and opcodes the tables name are in the committed SASS.
"""

from __future__ import annotations

import csv
import math
import re
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]
CUDA = REPO / "tests" / "fixtures" / "cuda"
HW = REPO / "tests" / "data" / "hw"

with open(CUDA / "kernels.toml", "rb") as handle:
    LAUNCHES = tomllib.load(handle)["launch"]


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


MEASURED = {row["launch"]: row for row in read_csv(HW / "kernels_sm90.csv")}
NEW_FILES = ("vectorize.cu", "ldgsts.cu", "atomics2.cu", "datadep.cu")
NEW = [launch for launch in LAUNCHES if launch["file"] in NEW_FILES]


def source_rows(launch_id: str) -> list[dict]:
    lines = (HW / "source_sm90" / f"{launch_id}.csv").read_text().splitlines()[1:]
    return [row for row in csv.DictReader(lines) if row["Source"] != "Source"]


def opcode(row: dict) -> str:
    words = row["Source"].split()
    return words[1] if words[0].startswith("@") else words[0]


def column_sum(rows: list[dict], column: str, prefix: tuple[str, ...]) -> int:
    return sum(int(row[column] or 0) for row in rows if opcode(row).startswith(prefix))


def sass_function(stem: str, kernel: str) -> str:
    listing = (HW / "sass" / f"{stem}.sass").read_text()
    return listing.split(f"Function : {kernel}")[1].split("Function :")[0]


def test_new_fixtures_are_measured():
    assert len(NEW) >= 70
    assert {launch["file"] for launch in NEW} == set(NEW_FILES)


@pytest.mark.parametrize("launch", LAUNCHES, ids=lambda launch: launch["id"])
def test_every_launch_has_row_source_page_and_sass(launch):
    row = MEASURED[launch["id"]]
    assert row["kernel"] == launch["kernel"] and row["grid"] == "x".join(map(str, launch["grid"]))
    rows = source_rows(launch["id"])
    assert rows, "empty source page"
    assert f"Function : {launch['kernel']}" in (HW / "sass" / f"{Path(launch['file']).stem}.sass").read_text()
    # the source page is the SASS listing's instructions of that kernel
    listing = sass_function(Path(launch["file"]).stem, launch["kernel"])
    assert len(rows) == len(re.findall(r"/\*[0-9a-f]{4}\*/", listing))


@pytest.mark.parametrize("launch", LAUNCHES, ids=lambda launch: launch["id"])
def test_source_page_rows_add_up_to_the_instrumented_counters(launch):
    """LDS*/STS*/LDGSTS*/ATOMS* rows of the source page sum to the smsp__sass_* totals of the same launch."""
    row, rows = MEASURED[launch["id"]], source_rows(launch["id"])
    wavefronts = lambda *prefix: column_sum(rows, "L1 Wavefronts Shared", prefix)
    if row["fixture"] != "generic.cu":  # generic LD/ST resolved to shared count as ld/st too
        assert wavefronts("LDS") - wavefronts("LDSM") == int(row["sass_wf_ld"])
        assert wavefronts("STS") - wavefronts("STSM") == int(row["sass_wf_st"])
    assert wavefronts("LDSM") == int(row["sass_wf_ldsm"] or 0)
    assert wavefronts("STSM") == int(row["sass_wf_stsm"] or 0)
    assert wavefronts("LDGSTS") == int(row["sass_wf_ldgsts"] or 0)
    assert wavefronts("ATOMS") == int(row["sass_wf_atom"] or 0)
    assert column_sum(rows, "Instructions Executed", ("LDGSTS",)) == int(row["inst_ldgsts"] or 0)


@pytest.mark.parametrize("launch", LAUNCHES, ids=lambda launch: launch["id"])
def test_kernel_level_ld_st_equal_the_attributed_wavefronts(launch):
    """l1tex ld/st wavefronts = SASS-attributed ones; generic_pointer_stride_1 may carry one unattributed store
    wavefront (seen in one of the two collections, docs/hardware.md)."""
    row = MEASURED[launch["id"]]
    ld = int(row["hw_wf_ld"]) - int(row["sass_wf_ld"]) - int(row["sass_wf_ldsm"] or 0)
    st = int(row["hw_wf_st"]) - int(row["sass_wf_st"]) - int(row["sass_wf_stsm"] or 0)
    assert (ld, st) in ({(0, 0), (0, 1)} if launch["id"] == "generic_pointer_stride_1" else {(0, 0)})


# -- vectorize.cu: the fusions are in the SASS, and the counters count the fused instruction --

@pytest.mark.parametrize("launch", [l for l in NEW if l["file"] == "vectorize.cu"], ids=lambda l: l["id"])
def test_vectorize_fusions(launch):
    ptx = (CUDA / "vectorize.sm_90.ptx").read_text().split(f".entry {launch['kernel']}(")[1].split(".entry")[0]
    sass = sass_function("vectorize", launch["kernel"])
    assert not re.search(r"(ld|st)\.shared\.v[24]", ptx), "nvcc must leave the accesses scalar"
    if launch["id"] == "vec_redundant_loads":
        assert not re.search(r"\b(LDS|STS)\.(64|128)\b", sass)
        return
    if launch["id"].startswith("vec_repeated_asm_loads"):  # ptxas removes the second of two identical loads
        assert len(re.findall(r"ld\.shared\.f32", ptx)) == 2
        assert len(re.findall(r"(?<!@!PT)\s+LDS\s", sass)) == 1
        assert int(MEASURED[launch["id"]]["inst_ld"]) == 2  # one per warp
        return
    assert re.search(r"\b(LDS|STS)\.(64|128)\b", sass)


def test_vectorize_conflict_ladder():
    """LDS.128 rows at 16/32/64-byte pitch: 4, 8, 16 wavefronts per warp (conflict-free, 2-way, 4-way)."""
    for pitch, per_warp in ((4, 4), (8, 8), (16, 16)):
        row = MEASURED[f"vec_row4_loads_pitch{pitch}"]
        assert int(row["hw_wf_ld"]) == 2 * per_warp and int(row["hw_bc_ld"]) == 2 * (per_warp - 4)


# -- ldgsts.cu ------------------------------------------------------------------

def ldgsts_per_warp(launch_id: str) -> tuple[int, int]:
    rows = [r for r in source_rows(launch_id) if opcode(r).startswith("LDGSTS")]
    warps = sum(int(r["Instructions Executed"]) for r in rows)
    return (sum(int(r["L1 Wavefronts Shared"]) for r in rows) // warps,
            sum(int(r["L1 Wavefronts Shared Ideal"]) for r in rows) // warps)


@pytest.mark.parametrize("launch_id, per_warp", [
    ("ldgsts_ca4_s4", (1, 1)), ("ldgsts_ca4_s128", (32, 1)), ("ldgsts_ca4_s4_src0", (1, 1)),
    ("ldgsts_ca8_s8", (2, 2)), ("ldgsts_ca8_s128", (32, 2)), ("ldgsts_ca8_s8_zfill_half", (2, 2)),
    ("ldgsts_ca16_s16", (4, 4)), ("ldgsts_ca16_s32", (8, 4)), ("ldgsts_ca16_s128", (32, 4)),
    ("ldgsts_ca16_s16_src0", (4, 4)), ("ldgsts_plain_ca4", (1, 1)), ("ldgsts_plain_ca16", (4, 4)),
    ("ldgsts_cg16_s16", (8, 8)), ("ldgsts_cg16_s32", (40, 8)), ("ldgsts_cg16_s128", (64, 8)),
    ("ldgsts_cg16_s16_src0", (8, 8)), ("ldgsts_multistage_matmul", (4, 4)),
    ("ldgsts_plain_ca4_s128", (32, 1)), ("ldgsts_plain_ca8_s8", (2, 2)), ("ldgsts_plain_ca8_s128", (32, 2)),
    ("ldgsts_plain_ca16_s32", (8, 4)), ("ldgsts_plain_ca16_s128", (32, 4)),
    ("ldgsts_plain_cg16_s16", (4, 4)), ("ldgsts_plain_cg16_s32", (32, 4)), ("ldgsts_plain_cg16_s128", (32, 4)),
])
def test_ldgsts_source_page_per_warp(launch_id, per_warp):
    assert ldgsts_per_warp(launch_id) == per_warp


@pytest.mark.parametrize("stride", [16, 32, 128])
def test_ldgsts_bypass_zfill_source_model(stride):
    """Source page: BYPASS.128.ZFILL = BYPASS.128 (4 ideal; 32 once conflicting) + the .ca 16-B (STS.128) model."""
    ca = "ldgsts_plain_ca16" if stride == 16 else f"ldgsts_plain_ca16_s{stride}"
    zfill, bypass, sts128 = (ldgsts_per_warp(i) for i in (f"ldgsts_cg16_s{stride}", f"ldgsts_plain_cg16_s{stride}", ca))
    assert zfill == (bypass[0] + sts128[0], bypass[1] + sts128[1])


def test_ldgsts_hardware_conflicts():
    """.ca: hw_bc_ldgsts = source wavefronts - ideal; .cg with a full source: invisible (0); src-size 0: visible."""
    for launch in (l for l in NEW if l["id"].startswith("ldgsts_")):
        row = MEASURED[launch["id"]]
        wavefronts, ideal = ldgsts_per_warp(launch["id"])
        warps = int(row["inst_ldgsts"])
        if "_ca" in launch["id"]:
            assert int(row["hw_bc_ldgsts"]) == (wavefronts - ideal) * warps, launch["id"]
        elif launch["id"] == "ldgsts_cg16_s128_src0":  # zero-fill only: counted like .ca 16 B (32 - 4 per warp)
            assert int(row["hw_bc_ldgsts"]) == 28 * warps
        else:
            assert int(row["hw_bc_ldgsts"]) == 0, launch["id"]


# -- atomics2.cu ------------------------------------------------------------------

ATOMIC_OPCODES = {"add": "ATOMS.ADD", "add1": "ATOMS.POPC.INC.32", "inc": "ATOMS.INC", "cas": "ATOMS.CAS",
                  "exch": "ATOMS.EXCH", "min": "ATOMS.MIN.S32", "max": "ATOMS.MAX.S32", "and": "ATOMS.AND",
                  "or": "ATOMS.OR"}


def atomics_by_pattern(launch_id: str, bits: int) -> dict[int, tuple[int, int, int]]:
    """Pattern (0..3, from the immediate offset) -> (wavefronts, ideal, executed) of its ATOMS rows."""
    found = defaultdict(lambda: [0, 0, 0])
    for row in source_rows(launch_id):
        if opcode(row).startswith("ATOMS"):
            offset = re.search(r"\+0x([0-9a-f]+)\]", row["Source"])
            pattern = int(offset.group(1), 16) // (1024 * bits // 8) if offset else 0
            for i, column in enumerate(("L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal", "Instructions Executed")):
                found[pattern][i] += int(row[column] or 0)
    return {p: tuple(v) for p, v in found.items()}


@pytest.mark.parametrize("launch", [l for l in NEW if l["file"] == "atomics2.cu"], ids=lambda l: l["id"])
def test_atomic_opcodes_and_wavefronts(launch):
    bits, op, use = re.fullmatch(r"atom(32|64)_(\w+?)_(used|unused)", launch["id"]).groups()
    bits = int(bits)
    sass = sass_function("atomics2", launch["kernel"])
    row = MEASURED[launch["id"]]
    patterns = atomics_by_pattern(launch["id"], bits)
    assert sum(v[0] for v in patterns.values()) == int(row["hw_wf_atom"]), "source page = kernel-level atom wavefronts"
    if bits == 64 and op in ("add", "min", "max", "and", "or"):
        assert "ATOMS.CAST.SPIN.64" in sass and int(row["hw_bc_atom"]) == 0
        return
    expected = ATOMIC_OPCODES[op] + (".64" if bits == 64 else "")
    if op == "add1" and use == "used":
        expected = "ATOMS.ADD"
    assert re.search(re.escape(expected) + r"\s", sass)
    ideal = {32: 1, 64: 2}[bits] * (2 if op == "cas" else 1)
    # ptxas reduces over the warp and lets one lane do the atomic on a uniform address
    aggregated = op in ("add", "add1") or (use == "unused" and op in ("min", "max", "and", "or"))
    # 32 lanes on one bank, one after another: 32 x ideal for 32-bit data; a 64-bit lane's ideal counts
    # two lanes per wavefront (EXCH.64 ideal 2 = 16 lanes a wavefront), so 16 x ideal
    serial = (32 if bits == 32 else 16) * ideal
    assert patterns[0][:2] == ((ideal if aggregated else serial), ideal)    # one word
    assert patterns[1][:2] == (ideal, ideal)                                # stride 1
    assert patterns[2][:2] == (serial, ideal)                               # stride 32: one bank
    assert patterns[3][:2] == ((1 if op == "add1" and use == "unused" else 2) * ideal, ideal)  # 2 lanes per word


# -- datadep.cu -------------------------------------------------------------------

def test_datadep_inputs_are_reproducible():
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_datadep_inputs", CUDA / "make_datadep_inputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, array in module.inputs().items():
        committed = np.load(CUDA / f"{name}.npy", allow_pickle=False)
        assert committed.dtype == array.dtype and np.array_equal(committed, array), name


def test_histogram_conflicts_follow_the_data():
    """ATOMS.POPC.INC merges lanes on one word: the skewed input (few distinct bins) has no conflict, the uniform one does."""
    skewed, uniform = MEASURED["datadep_hist_skewed"], MEASURED["datadep_hist_uniform"]
    assert int(skewed["inst_atom"]) == int(uniform["inst_atom"]) == 256
    assert int(skewed["hw_bc_atom"]) == 0 < int(uniform["hw_bc_atom"])


def test_transpose_permutation_gather_is_32_way():
    row = MEASURED["datadep_gather_transpose"]
    assert int(row["hw_wf_ld"]) == 32 * int(row["inst_ld"])


# -- kernel_vs_source_sm90.csv --------------------------------------------------------

REPEATS = read_csv(HW / "kernel_vs_source_sm90.csv")


def test_repeats_cover_multi_cta_launches_three_times():
    runs = defaultdict(set)
    for row in REPEATS:
        runs[row["launch"]].add(int(row["run"]))
    assert all(r == {0, 1, 2} for r in runs.values()) and len(runs) >= 6
    ctas = {row["launch"]: np.prod([int(x) for x in row["grid"].split("x")]) for row in REPEATS}
    assert sum(c >= 64 for c in ctas.values()) >= 5 and min(ctas.values()) == 1


def test_repeats_kernel_level_equals_source_page():
    """Per-op kernel counters equal the source-page LDS/STS sums in every run; only the all-op total exceeds them."""
    for row in REPEATS:
        assert int(row["hw_wf_ld"]) == int(row["source_wf_ld"]) and int(row["hw_wf_st"]) == int(row["source_wf_st"])
        assert int(row["source_wf"]) == int(row["source_wf_ld"]) + int(row["source_wf_st"])
        assert int(row["hw_wf_shared"]) > int(row["source_wf"])
        assert int(row["hw_bc_ld"]) + int(row["hw_bc_st"]) == int(row["source_wf"]) - int(row["source_ideal"])


# -- scale/: kernel-level counter vs Source page at large grids (docs/hardware.md) --------------------------
#
# tests/data/hw/scale/launches.toml and followup.toml, each launch measured in 3 ncu runs of the metrics pass and
# 3 of SourceCounters (kernel_vs_source.csv, followup/kernel_vs_source.csv; scripts/validate_hw.py stages
# `scale` and `scale_followup`). "excess" = kernel-level l1tex per-op wavefronts - the Source page's sum.

from test_fixtures import check_launch_against_ptx, compile_fixtures  # noqa: E402  (one launch-vs-PTX check)

SCALE = HW / "scale"
FIXTURE_ROOT = REPO / "tests" / "fixtures"
OPS = ("ld", "st")


def scale_manifest(name: str) -> list[dict]:
    with open(SCALE / name, "rb") as handle:
        return tomllib.load(handle)["launch"]


SCALE_LAUNCHES = scale_manifest("launches.toml") + scale_manifest("followup.toml")
SCALE_ROWS = read_csv(SCALE / "kernel_vs_source.csv") + read_csv(SCALE / "followup" / "kernel_vs_source.csv")
SCALE_BY_LAUNCH: dict[str, list[dict]] = defaultdict(list)
for _row in SCALE_ROWS:
    SCALE_BY_LAUNCH[_row["launch"]].append(_row)


def num(row: dict, column: str) -> int:
    return int(float(row[column] or 0))


def excess(row: dict, op: str) -> int:
    return num(row, f"hw_wf_{op}") - num(row, f"source_wf_{op}")


def ctas_per_sm(row: dict) -> int:
    """CTAs an SM holds at once: ncu's occupancy limit, or fewer when the grid gives each SM fewer."""
    limit = min(num(row, c) for c in ("limit_blocks", "limit_registers", "limit_shared_mem", "limit_warps"))
    return min(limit, -(-num(row, "ctas") // num(row, "sm_count")))


def scale_sass(launch: dict) -> str:
    stem = Path(launch["file"]).stem
    listing = SCALE / "sass" / f"{stem}.sass"
    text = (listing if listing.exists() else HW / "sass" / f"{stem}.sass").read_text()
    return text.split(f"Function : {launch['kernel']}")[1].split("Function :")[0]


def with_bypass_ldgsts(launch_id: str) -> bool:
    """The Source page's LDGSTS.BYPASS rows are Nsight's model and move between runs (the only rows that do)."""
    launch = next(l for l in SCALE_LAUNCHES if l["id"] == launch_id)
    return "LDGSTS.E.BYPASS" in scale_sass(launch)


@pytest.mark.parametrize("launch", SCALE_LAUNCHES, ids=lambda launch: launch["id"])
def test_scale_launch_matches_its_ptx_and_was_measured_three_times(launch):
    source = FIXTURE_ROOT / launch["file"]
    check_launch_against_ptx(launch, source.with_name(f"{source.stem}.sm_90.ptx").read_text())
    assert launch["question"].strip() and 0 <= launch.get("carveout_percent", 0) <= 100
    assert launch["dynamic_shared_bytes"] <= 227 * 1024
    rows = SCALE_BY_LAUNCH[launch["id"]]
    assert sorted(int(r["run"]) for r in rows) == [0, 1, 2]
    for row in rows:
        assert (row["kernel"], row["grid"], row["block"], num(row, "dynamic_shared_bytes")) == (
            launch["kernel"], "x".join(map(str, launch["grid"])), "x".join(map(str, launch["block"])),
            launch["dynamic_shared_bytes"])
        assert num(row, "ctas_launched") == math.prod(launch["grid"]) == num(row, "ctas")
        assert num(row, "passes") > 1
    # run 0's source page is committed; it is the SASS listing's instructions of that kernel
    folder = SCALE / "followup" / "pages" if launch["id"].startswith("followup_") else SCALE / "pages"
    lines = (folder / f"{launch['id']}.csv").read_text().splitlines()[1:]
    page = [r for r in csv.DictReader(lines) if r["Source"] != "Source"]
    assert len(page) == num(rows[0], "source_rows") == len(re.findall(r"/\*[0-9a-f]{4}\*/", scale_sass(launch)))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_probe_ptx_is_current_nvcc_output(tmp_path):
    source = FIXTURE_ROOT / "hw" / "contention.cu"
    fresh = compile_fixtures.compile_ptx(source, "sm_90", tmp_path)
    assert compile_fixtures.instructions(fresh.read_text()) == compile_fixtures.instructions(
        source.with_name(fresh.name).read_text())


def test_source_page_is_the_same_in_every_run():
    """The Source page follows from the addresses: identical in every run, whatever the grid or residency (only
    LDGSTS.BYPASS rows move). The SASS-instrumented smsp__sass counters of the metrics pass say the same."""
    for launch_id, rows in SCALE_BY_LAUNCH.items():
        for column in ("source_wf_ld", "source_ideal_ld", "source_wf_st", "source_ideal_st", "source_inst_ld"):
            assert len({r[column] for r in rows}) == 1, (launch_id, column)
        if not with_bypass_ldgsts(launch_id):
            assert all(r["source_same_as_run0"] == "1" for r in rows), launch_id
        for row in rows:
            assert num(row, "sass_wf_ld") + num(row, "sass_wf_ldsm") == num(row, "source_wf_ld"), launch_id
            assert num(row, "sass_wf_st") == num(row, "source_wf_st"), launch_id
    moved = {i for i, rows in SCALE_BY_LAUNCH.items() if any(r["source_same_as_run0"] == "0" for r in rows)}
    assert moved <= {i for i in SCALE_BY_LAUNCH if with_bypass_ldgsts(i)}


def test_counter_minus_bank_conflicts_is_the_source_ideal_and_never_below_the_source_page():
    for row in SCALE_ROWS:
        for op in OPS:
            assert num(row, f"hw_wf_{op}") - num(row, f"hw_bc_{op}") == num(row, f"source_ideal_{op}"), row["launch"]
            assert excess(row, op) >= 0, row["launch"]
        assert num(row, "hw_wf_atom") == num(row, "source_wf_atom") == 0


def test_no_excess_while_each_sm_holds_one_cta():
    """Every launch whose SMs hold one CTA at a time matches the Source page exactly, in every run: one CTA of up to
    32 warps with stores, barriers, global loads/stores or LDGSTS beside its loads, 132 CTAs, and 8,192-16,384
    CTAs in 62-124 waves kept one per SM by 120 KiB of dynamic shared memory."""
    alone = {i for i, rows in SCALE_BY_LAUNCH.items() if ctas_per_sm(rows[0]) == 1}
    for launch_id in alone:
        assert all(excess(r, op) == 0 for r in SCALE_BY_LAUNCH[launch_id] for op in OPS), launch_id
    assert {"probe_mixed_grid1", "probe_bar_grid1", "probe_ldg_stream_grid1", "probe_stg_stream_grid1",
            "followup_fill0_grid1_block1024", "matmul_async32_grid1", "hgemm_s3p0_grid1", "stride4_grid132",
            "transpose_32x33_w4096_one_per_sm", "matmul16_n2048_one_per_sm", "stride4_grid8192_one_per_sm"} <= alone
    assert max(num(SCALE_BY_LAUNCH[i][0], "ctas") for i in alone) >= 16_384 and len(alone) == 19


def test_excess_only_where_ctas_share_an_sm_and_it_moves_between_runs():
    shared = {i for i, rows in SCALE_BY_LAUNCH.items() if any(excess(r, op) for r in rows for op in OPS)}
    assert len(shared) >= 30
    for launch_id in shared:
        rows = SCALE_BY_LAUNCH[launch_id]
        assert ctas_per_sm(rows[0]) >= 2, launch_id
        if max(excess(r, "ld") for r in rows) >= 1000:
            assert len({excess(r, "ld") for r in rows}) >= 2, f"{launch_id}: the same excess in every run"


def test_residency_not_the_carveout_decides():
    """The 120 KiB of dynamic shared memory that keeps one CTA per SM also shrinks L1; the carve-out control has the
    smaller L1 and the usual residency, and keeps (more) excess."""
    for base in ("transpose_32x33_w4096", "matmul16_n2048", "stride4_grid8192"):
        control, alone = SCALE_BY_LAUNCH[f"{base}_carveout100"], SCALE_BY_LAUNCH[f"{base}_one_per_sm"]
        assert ctas_per_sm(control[0]) == ctas_per_sm(SCALE_BY_LAUNCH[base][0]) >= 8
        assert num(control[0], "shared_mem_config_bytes") == num(alone[0], "shared_mem_config_bytes")
        assert ctas_per_sm(alone[0]) == 1 and num(alone[0], "ctas") >= 8192
        assert all(excess(r, "ld") > 0 for r in control) and all(excess(r, "ld") == 0 for r in alone)


def test_excess_needs_no_store_barrier_or_global_load_and_grows_with_cta_turnover():
    """probe_cond with fill = 0: loads only (no shared store, no barrier, no global load); 8 waves of CTAs starting
    and ending beside running ones give over 40x the excess of one wave with the same CTAs per SM."""
    for row in SCALE_BY_LAUNCH["probe_cond_fill0_grid8448"]:
        assert num(row, "source_inst_st") == num(row, "inst_st") == num(row, "global_ld_requests") == 0
        assert excess(row, "ld") > num(row, "source_wf_ld") // 1000
    for many, one in (("probe_cond_fill0_grid8448", "probe_cond_fill0_grid1056"),
                      ("followup_fill0_grid2112_block1024", "followup_fill0_grid264_block1024")):
        assert ctas_per_sm(SCALE_BY_LAUNCH[many][0]) == ctas_per_sm(SCALE_BY_LAUNCH[one][0])
        assert min(excess(r, "ld") for r in SCALE_BY_LAUNCH[many]) > 40 * max(excess(r, "ld") for r in SCALE_BY_LAUNCH[one])
    # a single wave of CTAs that all start before any shared access: none
    for launch_id in ("transpose_32x32_w1024", "stride4_grid1024"):
        rows = SCALE_BY_LAUNCH[launch_id]
        assert ctas_per_sm(rows[0]) == 8 and all(excess(r, op) == 0 for r in rows for op in OPS)


def test_one_replay_pass_shows_the_same_excess():
    """The four ld/st counters alone fit one pass; the excess is there as in the 10-pass metrics runs."""
    single = read_csv(SCALE / "single_pass.csv")
    assert len(single) >= 18 and all(r["passes"] == "1" for r in single)
    for row in single:
        runs = SCALE_BY_LAUNCH[row["launch"]]
        extra = num(row, "hw_wf_ld") - num(runs[0], "source_wf_ld")
        usual = sum(excess(r, "ld") for r in runs) / len(runs)
        assert num(row, "hw_wf_ld") - num(row, "hw_bc_ld") == num(runs[0], "source_ideal_ld")
        # a launch with next to no excess in the metrics runs has next to none here (probe_ldg_hits: 1, 0, 0)
        assert (0 <= extra <= 5) if usual < 5 else 0.5 * usual < extra < 2 * usual, row["launch"]


def test_first_collection_agrees():
    """An earlier collection of the first 42 launches (same driver, card type, script but for the probes added
    since): the same launches are exact, and every excess of 1,000 or more is within 20% of this collection's."""
    first: dict[str, list[dict]] = defaultdict(list)
    for row in read_csv(SCALE / "raw" / "first_collection_kernel_vs_source.csv"):
        first[row["launch"]].append(row)
    assert len(first) == 42
    for launch_id, rows in first.items():
        for op in OPS:
            now = sum(excess(r, op) for r in SCALE_BY_LAUNCH[launch_id]) / 3
            then = sum(excess(r, op) for r in rows) / 3
            if ctas_per_sm(rows[0]) == 1:
                assert now == then == 0, launch_id
            if max(now, then) >= 1000:
                assert 0.8 < now / then < 1.25, (launch_id, op, now, then)


def scale_table_row(launch_id: str) -> str:
    """The row of docs/hardware.md's scale table for one launch, from the committed data."""
    rows = SCALE_BY_LAUNCH[launch_id]

    def excess_cell(op: str) -> str:
        values = [excess(r, op) for r in rows]
        low, high = min(values), max(values)
        text = f"{low:,}" if low == high else f"{low:,}–{high:,}"
        total = num(rows[0], f"source_wf_{op}")
        return text + (f" ({100 * high / total:.2g}%)" if high else "")

    return (f"| {launch_id} | {num(rows[0], 'ctas'):,} | {ctas_per_sm(rows[0])} | {num(rows[0], 'source_wf_ld'):,} | "
            f"{excess_cell('ld')} | {num(rows[0], 'source_wf_st'):,} | {excess_cell('st')} |")


def test_docs_scale_table_is_the_data():
    doc = (REPO / "docs" / "hardware.md").read_text()
    table = doc.split("<!-- scale table -->")[1]
    documented = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert documented and set(documented) == {scale_table_row(i) for i in SCALE_BY_LAUNCH}
