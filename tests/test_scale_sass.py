"""CTA classes at the SASS level (traceconf.sass.classes): what ptxas emits for the scale fixtures and for the
tricky uses of the CTA index counts exactly what emulating every CTA counts."""

from __future__ import annotations

import pytest

from test_emulate_support import kernel_text
from test_scale import LAUNCHES, SCALE, TRICKY, TRICKY_GRIDS
from traceconf.emulate import grid as scheduler
from traceconf.emulate.launch import LaunchRequest
from traceconf.rules import load_rule_sets
from traceconf import tools
from traceconf.pipeline import run_file

pytestmark = pytest.mark.skipif(tools.locate("ptxas") is None or tools.locate("nvdisasm") is None,
                                reason="the SASS level needs ptxas (CUDA toolkit) and nvdisasm (nvidia-cuda-nvdisasm)")


def _both(path, kernel: str, devices=("sm_90",), **launch):
    rule_sets = load_rule_sets(list(devices), "sm_90")
    out = []
    for classes in (True, False):
        analyses, failures = run_file(path, [kernel], LaunchRequest(classes=classes, **launch), rule_sets,
                                      level="sass")
        assert not failures and len(analyses) == 1, [f.line() for f in failures]
        assert analyses[0].launch["level"] == "sass" and "partial" not in analyses[0].launch
        out.append(analyses[0])
    return out


@pytest.mark.parametrize("fixture, kernel, launch", LAUNCHES, ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(LAUNCHES)])
def test_sass_classes_count_exactly_what_every_cta_counts(monkeypatch, fixture, kernel, launch):
    monkeypatch.setattr(scheduler, "CHUNK_THREADS", 512)
    fast, slow = _both(SCALE / f"{fixture}.sm_90.ptx", kernel, **launch)
    assert fast.results.num_rows and fast.results.equals(slow.results), (fast.results.to_pandas(),
                                                                         slow.results.to_pandas())
    assert "classes" not in slow.launch


def test_sass_classes_stand_for_the_grid_of_a_row_shifted_tile():
    # blockIdx.z moves ctaid_row's tile by whole bank rows and blockIdx.x only reaches a bounds check
    fast, slow = _both(SCALE / "ctaid.sm_90.ptx", "ctaid_row", block=(256, 1, 1), grid=(40, 1, 16),
                       params={"2": 9_000})
    assert fast.results.equals(slow.results)
    assert fast.launch["class_count"] < 20 and fast.launch["analysed_ctas"] < 100 < slow.launch["analysed_ctas"]


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_sass_tricky_uses_of_the_cta_index_still_count_exactly(monkeypatch, tmp_path, name):
    monkeypatch.setattr(scheduler, "CHUNK_THREADS", 128)
    path = tmp_path / f"{name}.ptx"
    path.write_text(kernel_text("""
        mov.u32 %r1, %tid.x;
        mul.lo.s32 %r5, %r1, 8;
        """ + TRICKY[name] + "\n        ret;", shared=".shared .align 4 .b8 buf[32768];\n"))
    fast, slow = _both(path, "k", block=(32, 1, 1), grid=TRICKY_GRIDS.get(name, (90, 1, 1)))
    assert fast.results.equals(slow.results), (fast.results.to_pandas(), slow.results.to_pandas())


def test_a_guard_that_depends_on_the_cta_index_opaquely_makes_what_it_guards_opaque(monkeypatch):
    # P2 = 100 <= ctaid < 200 through two carries (opaque): the corners 0 and 299 skip the guarded MOV, the
    # CTAs between take it, so their stores are 2-way instead of 1-way: no box may span them
    from test_sass_emulate import listing
    from traceconf.emulate import Launch
    from traceconf.emulate.launch import resolve_launch
    from traceconf.engine import count_wavefronts
    from traceconf.sass.emulate import emulate_sass
    from traceconf.sass.listing import parse_text

    monkeypatch.setattr(scheduler, "CHUNK_THREADS", 64)
    module = parse_text(listing(["S2R R0, SR_TID.X", "S2R R1, SR_CTAID.X", "IADD3 R3, P0, R1, -0x64, RZ",
                                 "IADD3 R6, P1, R1, -0xc8, RZ", "PLOP3.LUT P2, PT, P0, P1, PT, 0x30, 0x0",
                                 "MOV R4, 0x4", "@P2 MOV R4, 0x8", "IMAD R5, R0, R4, RZ", "STS [R5], RZ"]), "t.sass")
    rules = load_rule_sets(["sm_90"])[0]
    totals = []
    for classes in (True, False):
        launch = resolve_launch(Launch(block=(32, 1, 1), grid=(300, 1, 1), classes=classes), module.kernel("k"))
        result = emulate_sass(module, "k", launch)
        totals.append(int((count_wavefronts(result.accesses, rules)[0] * result.weights).sum()))
    assert totals == [200 * 1 + 100 * 2] * 2


def test_sass_unknown_data_mixed_with_the_cta_index_counts_exactly(monkeypatch, tmp_path):
    from test_scale import UNKNOWN_AND_CTA
    from traceconf.analyses.results import unresolved_summary
    monkeypatch.setattr(scheduler, "CHUNK_THREADS", 128)
    path = tmp_path / "unknown.ptx"
    path.write_text(kernel_text(UNKNOWN_AND_CTA, params=".param .u64 p", shared=".shared .align 4 .b8 buf[4096];\n"))
    fast, slow = _both(path, "k", block=(32, 1, 1), grid=(300, 1, 1))
    assert fast.results.equals(slow.results) and unresolved_summary(fast) == unresolved_summary(slow)
    assert fast.launch["class_count"], fast.launch


def test_the_class_checks_skip_steps_by_taints_alone_and_prove_the_same_classes(monkeypatch):
    # a check whose inputs' registers carry no CTA taint does nothing: it is skipped without reading a value;
    # every launch of the scale fixtures proves the same classes, and counts the same, with the shortcut or not
    from traceconf.emulate import classes as argument
    from traceconf.sass import classes as sass_classes

    monkeypatch.setattr(scheduler, "CHUNK_THREADS", 512)
    skipped = []

    def counting(*args):
        quiet = argument.quiet_test(*args)
        if quiet is None or quiet is argument.INERT:
            return quiet

        def test(m):
            skipped.append(quiet(m))
            return skipped[-1]
        return test
    rule_sets = load_rule_sets(["sm_90"], "sm_90")
    outcomes = []
    for shortcut in (counting, lambda *args: None):
        monkeypatch.setattr(sass_classes, "quiet_test", shortcut)
        outcomes.append([run_file(SCALE / f"{fixture}.sm_90.ptx", [kernel], LaunchRequest(**launch), rule_sets,
                                  level="sass")[0][0] for fixture, kernel, launch in LAUNCHES])
    assert sum(skipped) > len(skipped) // 2
    for fast, slow in zip(*outcomes):
        assert fast.launch.get("classes") == slow.launch.get("classes")
        assert fast.results.equals(slow.results) and fast.launch == slow.launch and fast.notes == slow.notes
