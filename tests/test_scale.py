"""Launches of any size: CTA classes give the exhaustive counts, memory and time stay bounded.

Every speed-up is checked against the exhaustive result (``classes=False`` runs
every CTA): the per-instruction results must be identical, not close.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from conftest import FIXTURES
from test_emulate_support import kernel_module, parse_path, run
from traceconf.emulate import grid as driver
from traceconf.emulate.classes import Box
from traceconf.emulate.launch import LimitReached, Limits
from traceconf.emulate.launch import LaunchRequest
from traceconf.pipeline import analyze_kernel
from traceconf.programs.ptx import PtxProgram
from traceconf.rules import load_rule_sets

SCALE = FIXTURES / "scale"


def _results(module, kernel, request: LaunchRequest, devices=("sm_90",)):
    analysis = analyze_kernel(PtxProgram(module), kernel, request, load_rule_sets(list(devices), "sm_90"))
    return analysis, analysis.results


def _exhaustive_and_classes(module, kernel, devices=("sm_90",), **launch):
    classes, fast = _results(module, kernel, LaunchRequest(**launch), devices)
    exhaustive, slow = _results(module, kernel, LaunchRequest(classes=False, **launch), devices)
    assert "partial" not in classes.launch and "partial" not in exhaustive.launch
    return classes, fast, slow


LAUNCHES = [
    # the bounds check cuts the last CTA short: "all in bounds" and "partly past n"
    ("reduce0", "reduce0", dict(block=(256, 1, 1), grid=(40, 1, 1), params={"2": 9_000}, dynamic_smem=1024)),
    ("reduce0", "reduce0", dict(block=(256, 1, 1), grid=(37, 1, 1), params={"2": 256 * 37}, dynamic_smem=1024)),
    # blockIdx.z moves the tile by whole bank rows; blockIdx.x reaches a bounds check
    ("ctaid", "ctaid_row", dict(block=(256, 1, 1), grid=(11, 2, 3), params={"2": 2_000})),
    # blockIdx.x moves the tile by one word per CTA: no class can cover two CTAs that access shared memory
    ("ctaid", "ctaid_skew", dict(block=(256, 1, 1), grid=(12, 1, 1), params={"2": 2_500})),
    ("matmul_async", "stages<16>", dict(block=(16, 16, 1), grid=(4, 5, 1), params={"3": 64, "4": 64})),
    ("matmul_async", "stages<32>", dict(block=(32, 32, 1), grid=(3, 3, 1), params={"3": 96, "4": 96})),
    # the grid is folded into blockIdx.z; CTAs past N return at once
    ("hgemm_stages", "<2, 0>", dict(block=(256, 1, 1), grid=(3, 2, 2), params={"3": 256, "4": 384, "5": 64})),
    ("hgemm_stages", "<3, 8>", dict(block=(256, 1, 1), grid=(2, 5, 1), params={"3": 512, "4": 256, "5": 96})),
]


@pytest.mark.parametrize("fixture, kernel, launch", LAUNCHES, ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(LAUNCHES)])
def test_classes_count_exactly_what_every_cta_counts(monkeypatch, fixture, kernel, launch):
    # small batches, so that these small grids take the class search rather than one exhaustive batch
    monkeypatch.setattr(driver, "CHUNK_THREADS", 512)
    module = parse_path(SCALE / f"{fixture}.sm_90.ptx")
    name = next(n for n in module.kernel_names() if kernel in n or kernel in _demangled(n))
    devices = ("sm_90", "sm_75") if fixture == "hgemm_stages" else ("sm_90", "sm_3x_8byte", "sm_1x", "cdna3")
    analysis, fast, slow = _exhaustive_and_classes(module, name, devices=devices, **launch)
    assert fast.num_rows and fast.equals(slow), (fast.to_pandas(), slow.to_pandas())
    if kernel != "ctaid_skew":
        assert analysis.launch.get("classes"), analysis.notes
        total = launch["grid"][0] * launch["grid"][1] * launch["grid"][2]
        assert sum(c["count"] for c in analysis.launch["classes"]) <= total


def _recorded_runs(monkeypatch) -> list[tuple[list[int], bool, bool]]:
    """(CTA ids, watched, ran to its end) of every machine the scheduler runs from now on."""
    runs = []
    original = driver._Runner.run

    def recording(self, ctas, watched=False):
        try:
            machine = original(self, ctas, watched)
        except Exception:
            runs.append((list(map(int, ctas)), watched, False))
            raise
        runs.append((list(map(int, ctas)), watched, True))
        return machine
    monkeypatch.setattr(driver._Runner, "run", recording)
    return runs


def test_the_class_search_emulates_cta_0_once(monkeypatch):
    # the probe stops at its first use of the CTA index (the bounds check): the class search runs CTA 0 anyway,
    # watched, as a corner of the grid
    runs = _recorded_runs(monkeypatch)
    module = parse_path(SCALE / "reduce0.sm_90.ptx")
    launch = dict(block=(256, 1, 1), grid=(40, 1, 1), params={"2": 9_000}, dynamic_smem=1024)
    analysis, fast, slow = _exhaustive_and_classes(module, "_Z7reduce0PKfPfj", **launch)
    assert fast.equals(slow)
    class_runs = runs[:runs.index(([0], False, True))]         # then the exhaustive launch's probe
    assert class_runs[0] == ([0], False, False)
    corners = [cta for ctas, watched, finished in class_runs[1:] if watched and finished for cta in ctas]
    assert len(class_runs) == 1 + len([r for r in class_runs[1:] if r[1]]) and corners[:2] == [0, 39]
    assert sorted(set(corners)) == sorted(corners) and analysis.launch["analysed_ctas"] == len(corners)


def test_a_kernel_whose_shared_accesses_ignore_the_cta_index_runs_the_probe_alone(monkeypatch):
    runs = _recorded_runs(monkeypatch)
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        mov.u32 %r2, %ctaid.x;
        shl.b32 %r5, %r1, 2;
        st.shared.u32 [%r5], %r2;
        ret;""", shared=".shared .align 4 .b8 buf[512];\n")
    result = run(module, grid=(300, 1, 1))
    assert runs == [([0], False, True)] and result.scale == 300 and result.emulated_ctas == 1


def _demangled(name: str) -> str:
    from traceconf.names import demangle
    return demangle(name)


def test_classes_are_few_and_cover_the_grid_for_a_bounds_check():
    module = parse_path(SCALE / "reduce0.sm_90.ptx")
    analysis, _ = _results(module, "_Z7reduce0PKfPfj", LaunchRequest(block=(256, 1, 1), grid=(4096, 1, 1),
                                                                     params={"2": 1_000_000}, dynamic_smem=1024))
    classes = analysis.launch["classes"]
    assert sum(c["count"] for c in classes) == 4096
    assert analysis.launch["analysed_ctas"] < 100            # log-many boxes around CTA 3906, not 4096 CTAs
    assert any("exact:" in note for note in analysis.notes)


def test_a_grid_of_2_to_the_38_ctas_is_exact_through_classes_in_seconds():
    module = parse_path(SCALE / "ctaid.sm_90.ptx")
    started = time.monotonic()
    analysis, results = _results(module, "_Z9ctaid_rowPKfPfi", LaunchRequest(
        block=(1024, 1, 1), grid=(65535, 65535, 64), params={"2": 16_000_000}))
    assert time.monotonic() - started < 30
    total = 65535 * 65535 * 64
    rows = {r["kind"]: r for r in results.to_pylist()}
    assert rows["st"]["executions"] == total * 32                       # every warp stores once
    # i = x * 1024 + t < n: CTAs with x < 15,625 load, in every (y, z)
    assert rows["ld"]["executions"] == 15_625 * 65535 * 64 * 32
    assert rows["ld"]["wavefronts"] == 2 * rows["ld"]["executions"]     # (t*2) % 1024: 2-way


def test_opaque_use_of_the_cta_index_runs_every_cta():
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        mov.u32 %r2, %ctaid.x;
        rem.u32 %r3, %r2, 4;
        shl.b32 %r4, %r3, 2;
        mad.lo.s32 %r5, %r1, 4, %r4;
        st.shared.u32 [%r5], %r1;
        ret;""", shared=".shared .align 4 .b8 buf[512];\n")
    result = run(module, grid=(300, 1, 1))
    assert not result.classes and result.scale == 1 and result.emulated_ctas >= 300


def test_row_multiples_of_the_cta_index_form_one_class_other_strides_do_not():
    def kernel(stride: int):
        return kernel_module(f"""
            mov.u32 %r1, %tid.x;
            mov.u32 %r2, %ctaid.x;
            mul.lo.s32 %r3, %r2, {stride};
            mad.lo.s32 %r5, %r1, 4, %r3;
            st.shared.u32 [%r5], %r1;
            ret;""", shared=".shared .align 4 .b8 buf[512];\n")
    whole_rows = run(kernel(256), grid=(2000, 1, 1))
    assert [c["count"] for c in whole_rows.classes] == [2000] and whole_rows.emulated_ctas < 10
    words = run(kernel(4), grid=(2000, 1, 1))
    assert words.scale == 1 and len(words.accesses) == 2000      # every CTA: its lanes move by one bank each


TRICKY = {
    # (ctaid.x << 31) wraps in 32 bits: not affine over the exact integers, must not be trusted
    "wrap": """
        mov.u32 %r2, %ctaid.x;
        shl.b32 %r3, %r2, 31;
        setp.eq.u32 %p1, %r3, 0;
        @%p1 bra SKIP;
        st.shared.u32 [%r5], %r1;
        SKIP:""",
    # only CTA 37 differs: an equality inside every box that holds it
    "equality": """
        mov.u32 %r2, %ctaid.x;
        setp.ne.u32 %p1, %r2, 37;
        @%p1 bra SKIP;
        st.shared.u32 [%r5+4], %r1;
        SKIP:""",
    # a diagonal in two dimensions: neither axis alone decides
    "diagonal": """
        mov.u32 %r2, %ctaid.x;
        mov.u32 %r3, %ctaid.y;
        setp.lt.u32 %p1, %r2, %r3;
        @%p1 st.shared.u32 [%r5+8], %r1;""",
    # a negative intermediate (n - i) is outside the checked range: those CTAs are not classed
    "negative": """
        mov.u32 %r2, %ctaid.x;
        mov.u32 %r3, 50;
        sub.s32 %r4, %r3, %r2;
        setp.gt.s32 %p1, %r4, 3;
        @%p1 st.shared.u32 [%r5+12], %r1;""",
    # the address moves by one bank per CTA: never the same wavefronts up to a row shift
    "skew": """
        mov.u32 %r2, %ctaid.x;
        shl.b32 %r6, %r2, 2;
        add.s32 %r7, %r5, %r6;
        st.shared.u32 [%r7], %r1;""",
    # a low-bit mask is the identity only below it: CTA 64 wraps to 0 (old nvcc's 16-bit %ctaid, ptxas's
    # 0xffff), so no class may span 63 and 64
    "mask": """
        mov.u32 %r2, %ctaid.x;
        and.b32 %r3, %r2, 63;
        shl.b32 %r6, %r3, 7;
        add.s32 %r7, %r5, %r6;
        st.shared.u32 [%r7], %r1;""",
    # reading a CTA-dependent value at a narrower type truncates it: CTA 256 reads as 0
    "truncate": """
        mov.u32 %r2, %ctaid.x;
        cvt.u16.u32 %rs1, %r2;
        cvt.u32.u8 %r3, %rs1;
        shl.b32 %r6, %r3, 7;
        add.s32 %r7, %r5, %r6;
        st.shared.u32 [%r7], %r1;""",
    # selp between two affine values by a decided predicate, then an address with whole-row steps
    "select": """
        mov.u32 %r2, %ctaid.x;
        setp.lt.u32 %p1, %r2, 40;
        mul.lo.s32 %r3, %r2, 128;
        mul.lo.s32 %r4, %r2, 256;
        selp.b32 %r6, %r3, %r4, %p1;
        add.s32 %r7, %r5, %r6;
        st.shared.u32 [%r7], %r1;""",
}


TRICKY_GRIDS = {"diagonal": (70, 9, 1), "truncate": (300, 1, 1)}


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_uses_of_the_cta_index_still_count_exactly(monkeypatch, name):
    monkeypatch.setattr(driver, "CHUNK_THREADS", 128)
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        mul.lo.s32 %r5, %r1, 8;
        """ + TRICKY[name] + "\n        ret;", shared=".shared .align 4 .b8 buf[65536];\n")
    request = dict(block=(32, 1, 1), grid=TRICKY_GRIDS.get(name, (90, 1, 1)))
    analysis, fast, slow = _exhaustive_and_classes(module, "k", devices=("sm_90", "sm_1x"), **request)
    assert fast.equals(slow), (fast.to_pandas(), slow.to_pandas())


def test_runaway_loop_stops_at_the_time_limit_with_what_was_counted():
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        shl.b32 %r5, %r1, 2;
        st.shared.u32 [%r5], %r1;
        LOOP:
        bra LOOP;""", shared=".shared .align 4 .b8 buf[512];\n")
    started = time.monotonic()
    result = run(module, grid=(1, 1, 1), time_limit=1.0, max_steps=10**12)
    assert time.monotonic() - started < 10
    assert result.partial and "time limit of 1 s" in result.partial
    assert len(result.accesses) == 1                       # the store before the loop is kept


def test_memory_limit_stops_cleanly():
    module = parse_path(SCALE / "ctaid.sm_90.ptx")
    analysis, _ = _results(module, "_Z10ctaid_skewPKfPfi", LaunchRequest(
        block=(256, 1, 1), grid=(64, 1, 1), params={"2": 10_000}, memory_limit=1 << 20))
    assert "memory limit" in analysis.launch["partial"]
    assert any(note.startswith("partial:") and "--ctas" in note for note in analysis.notes)


def test_limits_raise_limit_reached():
    with pytest.raises(LimitReached, match="time limit"):
        Limits(0.0, 1 << 40).check()


def test_box_chunks_walk_a_box_without_building_it():
    box = Box((2, 1, 0), (4, 2, 1))
    grid = (10, 5, 3)
    ids = [i for chunk in driver.box_chunks(box, grid, 4) for i in chunk.tolist()]
    expected = [x + 10 * (y + 5 * z) for z in (0, 1) for y in (1, 2) for x in (2, 3, 4)]
    assert ids == expected and box.size == 12
    huge = driver.box_chunks(Box((0, 0, 0), (65534, 65534, 63)), (65535, 65535, 64), 32)
    assert len(next(huge)) == 32


def test_sample_of_a_huge_grid_does_not_list_every_cta():
    module = parse_path(SCALE / "ctaid.sm_90.ptx")
    analysis, results = _results(module, "_Z10ctaid_skewPKfPfi", LaunchRequest(
        block=(1024, 1, 1), grid=(65535, 65535, 64), params={"2": 16_000_000}, ctas=4))
    assert analysis.launch["sampled_ctas"] == [4, 65535 * 65535 * 64]
    assert isinstance(results, pa.Table) and results.num_rows


def test_guard_false_everywhere_in_cta_0_still_ties_the_kernel_to_the_cta_index():
    # x < y never holds in CTA (0, 0): scaling CTA 0 would count no store at all
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        mul.lo.s32 %r5, %r1, 8;
        """ + TRICKY["diagonal"] + "\n        ret;", shared=".shared .align 4 .b8 buf[65536];\n")
    analysis, results = _results(module, "k", LaunchRequest(block=(32, 1, 1), grid=(70, 9, 1)))
    assert results.column("executions").to_pylist() == [sum(min(y, 70) for y in range(9))]


def _cli(*args):
    from typer.testing import CliRunner

    from traceconf.cli import app
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:                       # click >= 8.2 keeps stderr apart already
        runner = CliRunner()
    return runner.invoke(app, ["analyze", *map(str, args)])


def test_cli_time_limit_labels_the_counts_partial_and_says_how_to_go_on():
    result = _cli(SCALE / "ctaid.sm_90.ptx", "-k", "ctaid_skew", "--block", "1024", "--grid", "65535,65535,64",
                  "-p", "2=16000000", "--time-limit", "1")
    assert result.exit_code == 0
    assert "PARTIAL" in result.stdout and "--time-limit" in result.stderr and "--ctas N" in result.stderr


@pytest.mark.parametrize("args", [
    # PTX: the bounds check is a branch on the CTA index
    [SCALE / "reduce0.sm_90.ptx", "--block", "256", "--grid", "300", "-p", "2=70000", "--dynamic-smem", "1024",
     "--level", "ptx"],
    # SASS (ptxas turns reduce0's check into a select, so take a kernel whose SASS keeps the CTA index in an
    # address and a branch): the SASS rules of traceconf.sass.classes
    [SCALE / "ctaid.sm_90.ptx", "-k", "ctaid_row", "--block", "256", "--grid", "300,1,8", "-p", "2=70000",
     "--level", "sass"],
], ids=["ptx", "sass"])
def test_cli_exhaustive_and_classes_print_the_same_totals(args):
    if "sass" in args:
        from traceconf import tools
        if tools.locate("ptxas") is None or tools.locate("nvdisasm") is None:
            pytest.skip("no ptxas/nvdisasm for the SASS level")
    args = [*args, "--format", "json"]
    import json
    fast, slow = _cli(*args), _cli(*args, "--exhaustive")
    assert fast.exit_code == slow.exit_code == 0
    classes = json.loads(fast.stdout)["results"][0]
    every = json.loads(slow.stdout)["results"][0]
    assert classes["launch"]["classes"] and "classes" not in every["launch"]
    assert classes["totals"] == every["totals"] and classes["instructions"] == every["instructions"]


@pytest.mark.parametrize("size, ok", [("4G", True), ("512M", True), ("100000000", True), ("lots", False)])
def test_cli_memory_limit_sizes(size, ok):
    result = _cli(SCALE / "reduce0.sm_90.ptx", "--block", "256", "--grid", "4", "-p", "2=700",
                  "--dynamic-smem", "1024", "--memory-limit", size)
    assert result.exit_code == (0 if ok else 2)
    if not ok:
        assert "--memory-limit" in result.stderr


def test_suggest_reads_the_declared_row_of_the_tile(tmp_path):
    from traceconf.analyses.suggest import declared_row
    source = tmp_path / "k.cu"
    source.write_text("#define TILE 64\nconstexpr int PAD = 1;\n__global__ void a() {\n"
                      "    __shared__ float tile[TILE][TILE / 4 + PAD];\n    tile[0][0] = 1;\n}\n"
                      "__global__ void b() {\n    __shared__ __align__(16) half tile[8][40];\n    tile[1][1] = 0;\n}\n")
    assert declared_row(str(source), 5, str(tmp_path / "k.ptx"), "tile") == (17 * 4, "tile[…][TILE / 4 + PAD]")
    assert declared_row(str(source), 9, str(tmp_path / "k.ptx"), "tile") == (80, "tile[…][40]")
    assert declared_row("k.cu", 9, str(tmp_path / "k.ptx"), "missing") is None


def test_suggestion_speaks_of_the_declared_row_not_the_lane_distance():
    from traceconf.analyses.suggest import suggestions
    module = parse_path(SCALE / "row_steps.sm_90.ptx")
    rules = load_rule_sets(["sm_90"], "sm_90")
    analysis = analyze_kernel(PtxProgram(module), "_Z9row_stepsPf", LaunchRequest(block=(32, 1, 1)), rules)
    found = [s for _, s in suggestions(analysis, rules[0], 20) if s is not None]
    # lanes are 68 words (4 rows of 17) apart; no change of the 17-word row removes the 4-way conflict
    assert found and all(s.row_bytes == 17 * 4 for s in found)
    assert all("68" not in s.headline() and "18→" not in s.headline() for s in found)


def test_suggestion_vectorises_scalar_neighbour_reads():
    from traceconf.analyses.suggest import suggestions
    module = parse_path(SCALE / "vec_reads.sm_90.ptx")
    rules = load_rule_sets(["sm_90"], "sm_90")
    analysis = analyze_kernel(PtxProgram(module), "_Z9vec_readsPKfPfi", LaunchRequest(block=(128, 1, 1), params={"2": 0}),
                                  rules)
    found = [s for _, s in suggestions(analysis, rules[0], 64) if s is not None and s.best is not None]
    assert found and all("16-byte vectors (ld.shared.v4, e.g. float4)" in s.best.label for s in found)
    best = found[0].best
    # 16 groups of 4 scalar loads, 4 warps: 4-way each (16 wavefronts) → one float4 load (4 wavefronts)
    assert found[0].baseline.wavefronts - best.wavefronts == 16 * (4 * 16 - 16)
    assert sum(1 for w, _ in best.per_instruction.values() if w == 0) == 16 * 3


def test_unresolved_executions_are_weighted_like_the_counts():
    # CTAs below 40 store at an address loaded from memory (unresolved); every CTA stores at a known one
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        mov.u32 %r2, %ctaid.x;
        setp.lt.u32 %p1, %r2, 40;
        ld.param.u64 %rd1, [p];
        ld.global.u32 %r3, [%rd1];
        shl.b32 %r4, %r3, 2;
        @%p1 st.shared.u32 [%r4], %r1;
        mul.lo.s32 %r5, %r1, 4;
        st.shared.u32 [%r5], %r1;
        ret;""", params=".param .u64 p", shared=".shared .align 4 .b8 buf[512];\n")
    from traceconf.analyses.results import unresolved_summary
    classes, fast, slow = _exhaustive_and_classes(module, "k", block=(64, 1, 1), grid=(300, 1, 1))
    exhaustive, _ = _results(module, "k", LaunchRequest(block=(64, 1, 1), grid=(300, 1, 1), classes=False))
    assert classes.launch["class_count"] and classes.launch["analysed_ctas"] < 100
    assert fast.equals(slow)
    assert unresolved_summary(classes) == unresolved_summary(exhaustive) == (40 * 2, 0)
    # no CTA dependence: one CTA stands for all, its unresolved executions too
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        ld.param.u64 %rd1, [p];
        ld.global.u32 %r3, [%rd1];
        shl.b32 %r4, %r3, 2;
        st.shared.u32 [%r4], %r1;
        ret;""", params=".param .u64 p", shared=".shared .align 4 .b8 buf[512];\n")
    scaled, _ = _results(module, "k", LaunchRequest(block=(64, 1, 1), grid=(30, 1, 1)))
    assert scaled.launch["scale"] == 30 and unresolved_summary(scaled) == (30 * 2, 0)


def test_a_guarded_write_skipped_in_cta_0_still_ties_its_register_to_the_cta_index():
    # r4 is 8 from CTA 100 on; CTA 0 skips the guarded mov, yet its r4 must not look CTA-independent
    module = kernel_module("""
        mov.u32 %r1, %tid.x;
        mov.u32 %r2, %ctaid.x;
        setp.ge.u32 %p1, %r2, 100;
        mov.u32 %r4, 4;
        @%p1 mov.u32 %r4, 8;
        mul.lo.s32 %r5, %r1, %r4;
        st.shared.u32 [%r5], %r1;
        ret;""", shared=".shared .align 4 .b8 buf[512];\n")
    for classes in (True, False):
        analysis, results = _results(module, "k", LaunchRequest(block=(32, 1, 1), grid=(300, 1, 1),
                                                                classes=classes))
        assert results.column("wavefronts").to_pylist() == [100 * 1 + 200 * 2], analysis.launch


#: loaded data (unknown without --data) mixed with the CTA index: its uses are explored or unresolved alike in
#: every CTA, so they need no affinity; the bounds check beside it still decides the classes
UNKNOWN_AND_CTA = """
        mov.u32 %r1, %tid.x;
        mul.lo.s32 %r5, %r1, 8;
        mov.u32 %r2, %ctaid.x;
        ld.param.u64 %rd1, [p];
        ld.global.u32 %r3, [%rd1];
        add.s32 %r4, %r3, %r2;
        setp.lt.u32 %p1, %r4, 40;
        @%p1 bra SKIP;
        st.shared.u32 [%r5+16], %r1;
        SKIP:
        setp.lt.u32 %p2, %r2, 40;
        @%p2 st.shared.u32 [%r5+20], %r1;
        shl.b32 %r6, %r4, 2;
        st.shared.u32 [%r6], %r1;
        ret;"""


def test_unknown_data_mixed_with_the_cta_index_keeps_classes_and_counts_exactly(monkeypatch):
    from traceconf.analyses.results import unresolved_summary
    monkeypatch.setattr(driver, "CHUNK_THREADS", 128)
    module = kernel_module(UNKNOWN_AND_CTA, params=".param .u64 p", shared=".shared .align 4 .b8 buf[4096];\n")
    classes, fast, slow = _exhaustive_and_classes(module, "k", block=(32, 1, 1), grid=(300, 1, 1))
    exhaustive, _ = _results(module, "k", LaunchRequest(block=(32, 1, 1), grid=(300, 1, 1), classes=False))
    assert fast.equals(slow) and unresolved_summary(classes) == unresolved_summary(exhaustive)
    assert classes.launch["class_count"] and classes.launch["analysed_ctas"] < 100, classes.launch
