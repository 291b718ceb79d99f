"""Sliced emulation (traceconf.emulate.slice) reports exactly what full emulation reports.

Each launch runs twice through the one pipeline, once with every instruction emulated
(``TRACECONF_FULL_EMULATION=1``) and once sliced, and everything the reports read must be equal: every
column of every per-instruction result, the instruction table, unresolved entries, notes (CTA classes,
partial flags, data notes), the launch facts, and the failures' messages.  A representative set is fast; the
fixtures, corpus, hardware families and kernels.toml launches at both levels, with and without data, are slow.
The mutation tests check that the comparison is not vacuous: a slice that drops one instruction it keeps is
caught, and the slice does skip work where the issue says it should.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

from traceconf import tools
from traceconf.emulate import slice as slicing
from traceconf.emulate.launch import LaunchRequest
from traceconf.pipeline import run_file
from traceconf.rules import load_rule_set

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SAMPLES = FIXTURES / "emulate" / "samples.ptx"
CORPUS = REPO.parent / "shared" / "corpus"
REDUCTION = CORPUS / "reduction_kernel.ptx"
SASS_INPUTS = REPO / "tests" / "data" / "sass"
HAS_SASS = tools.locate("nvdisasm") is not None and tools.locate("ptxas") is not None
needs_sass = pytest.mark.skipif(not HAS_SASS, reason="needs ptxas and nvdisasm")
needs_corpus = pytest.mark.skipif(not REDUCTION.exists(), reason="needs ../shared/corpus")
RULES = [load_rule_set("sm_90")]


def canonical(done, failed) -> list:
    """Everything the reports read of one run, as plain data."""
    out = []
    for analysis in done:
        out.append({"kernel": analysis.kernel, "launch": analysis.launch, "results": analysis.results.to_pylist(),
                    "instructions": analysis.instructions.to_pylist(), "unresolved": analysis.unresolved,
                    "notes": analysis.notes, "complete": analysis.complete, "gaps": analysis.device_gaps,
                    "layout": analysis.shared_layout})
    return out + [failure.line() for failure in failed]


def analyse(path, request: LaunchRequest, level: str, kernels=None, full: bool = False) -> list:
    """canonical() of one run, sliced or with every instruction emulated (``full``)."""
    before = os.environ.get(slicing.FULL_EMULATION)
    os.environ[slicing.FULL_EMULATION] = "1" if full else ""
    try:
        return canonical(*run_file(path, kernels, request, RULES, level=level))
    finally:
        if before is None:
            os.environ.pop(slicing.FULL_EMULATION)
        else:
            os.environ[slicing.FULL_EMULATION] = before


def assert_same(path, request: LaunchRequest, level: str = "ptx", kernels=None) -> list:
    full = analyse(path, request, level, kernels, full=True)
    sliced = analyse(path, request, level, kernels)
    assert sliced == full
    return sliced


def request(block=(128, 1, 1), grid=(3, 1, 1), params=None, data=None, dynamic_smem=0, work_limit=None):
    return LaunchRequest(block=block, grid=grid, params=dict(params or {}), data=dict(data or {}),
                         dynamic_smem=dynamic_smem, work_limit=work_limit)


def _plan(effects, modelled=frozenset({"shared"})):
    """kept flags of straight-line ``effects`` (each instruction followed by the next)."""
    return list(slicing.dependence(effects, [[i + 1] for i in range(len(effects))], modelled).kept)


E = slicing.Effect


def test_a_write_hides_older_writes_of_its_register_unless_guarded():
    access = E(places=frozenset({"r"}), seed=True)
    assert _plan([E(defs=frozenset({"r"})), E(defs=frozenset({"r"})), access]) == [False, True, True]
    assert _plan([E(defs=frozenset({"r"})), E(defs=frozenset({"r"}), guarded=True), access]) == [True, True, True]
    # a write only perhaps that wide (kills: what it surely overwrites) hides nothing else
    assert _plan([E(defs=frozenset({"r"})), E(defs=frozenset({"q", "r"}), kills=frozenset({"q"})), access]) == \
        [True, True, True]


def test_a_needed_load_needs_the_stores_of_its_space_and_their_values():
    effects = [E(defs=frozenset({"v"})), E(values=frozenset({"v"}), writes=frozenset({"shared"})),
               E(defs=frozenset({"x"}), reads=frozenset({"shared"}), loaded=True),
               E(places=frozenset({"x"}), seed=True), E(defs=frozenset({"unused"}))]
    assert _plan(effects) == [True, True, True, True, False]
    # memory whose contents are not kept (global without --data): the store changes nothing a load returns
    assert _plan(effects, modelled=frozenset()) == [False, False, True, True, False]


def test_loads_naming_pointers_run_once_a_loaded_value_is_needed():
    pointer_load = E(defs=frozenset({"p"}), reads=frozenset({"global"}), loaded=True, names_pointers=True)
    loaded = E(defs=frozenset({"x"}), reads=frozenset({"shared"}), loaded=True)
    assert _plan([pointer_load, E(places=frozenset(), seed=True)]) == [False, True]
    assert _plan([pointer_load, loaded, E(places=frozenset({"x"}), seed=True)]) == [True, True, True]


NEGATED_SOURCES = """.version 8.0
.target sm_90
.address_size 64

.visible .entry k()
.reqntid 32
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b32 q<2>;
    .shared .align 4 .b32 data[2048];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 0;
    setp.lt.u32 %p2, %r1, 16;
    and.pred %p3, %p1, %p2;
    selp.b32 %r3, 1, 32, !%p3;
    mul.lo.u32 q1, %r1, %r3;
    shl.b32 %r5, q1, 2;
    mov.u32 %r6, data;
    add.u32 %r7, %r6, %r5;
    st.shared.u32 [%r7], %r1;
    ret;
}
"""


def test_a_register_read_negated_or_without_a_percent_keeps_its_writer(tmp_path):
    """``selp ..., !%p3`` reads %p3 (a pred_not operand) and q1 is a register without "%": the and.pred and the
    mul that write them are kept, so the store's address is the full emulation's (it was reported unknown)."""
    path = tmp_path / "negated.ptx"
    path.write_text(NEGATED_SOURCES)
    (analysis,) = assert_same(path, request(block=(32, 1, 1), grid=(1, 1, 1)))
    assert not analysis["unresolved"] and [row["wavefronts"] for row in analysis["results"]] == [8]


def test_full_emulation_switch(monkeypatch):
    monkeypatch.setenv(slicing.FULL_EMULATION, "1")
    found = slicing.dependence([E(defs=frozenset({"r"})), E(seed=True)], [[1], [2]], frozenset())
    assert found.kept == (False, True) and found.plan is None


#: Launches of the issue's kernels at small sizes: (name, path, kernel, request).
def _small_launches():
    words = 4096
    yield "histogram64", SAMPLES, "histogram64", request((64, 1, 1), (4, 1, 1), {"2": words},
                                                         {"1": f"random:uint32:{words}"})
    yield "histogram256", SAMPLES, "histogram256", request((192, 1, 1), (3, 1, 1), {"2": words},
                                                           {"1": f"random:uint32:{words}"})
    yield "bitonic", SAMPLES, "bitonic_sort_shared", request((512, 1, 1), (2, 1, 1), {"4": 1024, "5": 1},
                                                             {"2": f"random:uint32:{2048}",
                                                              "3": f"random:uint32:{2048}"})
    yield "convolution_rows", FIXTURES / "emulate" / "convolution.ptx", "convolution_rows", request(
        (16, 4, 1), (3, 2, 1), {"2": 3072, "3": 3072, "4": 3072})
    if REDUCTION.exists():
        for number, kernel in ((0, ""), (3, ""), (6, "_Z17reduce6_SMVERSIONIiLj256ELb1EEvPT_S1_j")):
            name = kernel or f"_Z17reduce{number}_SMVERSIONIiEvPT_S1_j"
            yield f"reduce{number}", REDUCTION, name, request((256, 1, 1), (4, 1, 1), {"2": 1 << 14},
                                                             dynamic_smem=1024)


SMALL = list(_small_launches())


@pytest.mark.parametrize("level", ["ptx", pytest.param("sass", marks=needs_sass)])
@pytest.mark.parametrize("name, path, kernel, launch", [pytest.param(*case, id=case[0]) for case in SMALL])
def test_sliced_equals_full_on_the_issue_kernels(name, path, kernel, launch, level):
    assert_same(path, launch, level, [f"^{re.escape(kernel)}$"])


#: reduce6 of the corpus (int, PTX and its SASS) and of cuda-samples (float, the cubin measured on the H100, whose
#: loop sums with FADD: a 32-bit result taken to write its pair made the thread-index register depend on the loop).
REDUCE6 = [pytest.param(REDUCTION, "_Z17reduce6_SMVERSIONIiLj256ELb1EEvPT_S1_j", level, id=f"corpus-{level}",
                        marks=[needs_corpus] + ([needs_sass] if level == "sass" else [])) for level in ("ptx", "sass")]
REDUCE6.append(pytest.param(REPO / "tests" / "fixtures" / "samples20" / "samples20.sm_90.cubin",
                            "_Z7reduce6ILj256ELb1EEvPKfPfj", "auto", id="samples20-cubin", marks=[needs_sass]))


@pytest.mark.parametrize("path, kernel, level", REDUCE6)
def test_reduce6_without_data_skips_its_loads(path, kernel, level, monkeypatch):
    """The grid-stride loop's global loads and sums are not emulated: fewer warp steps, the same report."""
    from traceconf.emulate import launch as launch_module
    spent = []
    spend = launch_module.Limits.spend
    monkeypatch.setattr(launch_module.Limits, "spend", lambda self, steps, warps: (spent.append(steps),
                                                                                    spend(self, steps, warps)))
    kernels = [f"^{re.escape(kernel)}$"]
    launch = request((256, 1, 1), (4, 1, 1), {"2": 1 << 16}, dynamic_smem=1024)
    full = analyse(path, launch, level, kernels, full=True)
    full_steps, spent[:] = sum(spent), []
    assert analyse(path, launch, level, kernels) == full
    assert sum(spent) < 0.7 * full_steps


def _kept_plan_dropping(victims_of):
    """slice.dependence, with the kept instructions ``victims_of(kept, effects)`` dropped from it."""
    real = slicing.dependence

    def mutated(effects, successors, modelled):
        found = real(effects, successors, modelled)
        kept = list(found.kept)
        for victim in victims_of(kept, effects):
            kept[victim] = False
        return dataclasses.replace(found, kept=tuple(kept))
    return mutated


def _address_writers(kept, effects) -> list[int]:
    """Kept instructions that are no seed and write a register some seed reads (an address, a condition)."""
    wanted = set().union(*(e.places for e in effects if e.seed))
    return [i for i, e in enumerate(effects) if kept[i] and not e.seed and e.defs & wanted]


@pytest.mark.parametrize("level", ["ptx", pytest.param("sass", marks=needs_sass)])
def test_a_slice_that_drops_the_address_computations_is_caught(level, monkeypatch):
    """Dropping the kept instructions that shared addresses and conditions read changes the report: the
    differential test would see it (the comparison is not vacuous)."""
    launch = request((64, 1, 1), (2, 1, 1), {"2": 4096}, {"1": "random:uint32:4096"})
    kernel = ["^histogram64$"]
    full = analyse(SAMPLES, launch, level, kernel, full=True)
    for module in (sys.modules["traceconf.emulate.driver"], sys.modules.get("traceconf.sass.emulate")):
        if module is not None:
            monkeypatch.setattr(module, "dependence", _kept_plan_dropping(_address_writers))
    try:
        mutated = analyse(SAMPLES, launch, level, kernel)
    except Exception as error:        # a dropped instruction may also break the run: caught all the same
        mutated = [repr(error)]
    assert mutated != full


@pytest.mark.parametrize("seed", range(6))
def test_random_drops_of_needed_instructions_are_caught(seed, monkeypatch):
    """Dropping one kept instruction, at random among those writing a register a shared access or a branch
    reads, changes the transpose's report."""
    import random
    path = FIXTURES / "emulate" / "transpose.ptx"
    launch = request((32, 8, 1), (2, 2, 1), {})
    full = analyse(path, launch, "ptx", full=True)
    chooser = random.Random(seed)

    def victim(kept, effects):
        candidates = _address_writers(kept, effects)
        return [chooser.choice(candidates)] if candidates else []
    monkeypatch.setattr(sys.modules["traceconf.emulate.driver"], "dependence", _kept_plan_dropping(victim))
    try:
        mutated = analyse(path, launch, "ptx")
    except Exception as error:
        mutated = [repr(error)]
    assert mutated != full


# --------------------------------------------------------------------------- slow: everything we hold


def _fixture_files():
    for path in sorted((FIXTURES / "emulate").glob("*.ptx")) + sorted((FIXTURES / "ptx").glob("*.ptx")):
        yield pytest.param(path, id=path.name)
    if CORPUS.exists():
        for path in sorted(CORPUS.glob("*.ptx")):
            yield pytest.param(path, id=f"corpus/{path.name}")


@pytest.mark.slow
@pytest.mark.parametrize("level", ["ptx", pytest.param("sass", marks=needs_sass)])
@pytest.mark.parametrize("path", list(_fixture_files()))
def test_sliced_equals_full_on_every_fixture(path, level):
    """Every kernel of every PTX fixture and corpus file, a small launch with no parameters given (missing
    ones fail alike, or leave pointers unknown alike)."""
    assert_same(path, request(work_limit=5_000_000), level)


@pytest.mark.slow
@needs_sass
@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in sorted(SASS_INPUTS.iterdir())
                                  if p.suffix in (".sass", ".cubin", ".so")])
def test_sliced_equals_full_on_sass_inputs(path):
    assert_same(path, request(work_limit=5_000_000), "auto")


def _hw_launches():
    sys.path.insert(0, str(REPO / "tests"))
    from test_hw_families import CUBINS, FAMILIES, _dims, _pairs, manifest
    for family in FAMILIES:
        for row in manifest(family):
            folder = FIXTURES / family
            cubin = folder / CUBINS.get(row["fixture"], row["fixture"])
            data = {key: str(folder / name) for key, name in _pairs(row["data"]).items()}
            launch = LaunchRequest(block=_dims(row["block"]), grid=_dims(row["grid"]),
                                   params=_pairs(row["params"]), dynamic_smem=int(row["dynamic_smem"]), data=data)
            yield pytest.param(cubin, row["kernel"], launch, id=f"{family}/{row['launch']}")


@pytest.mark.slow
@needs_sass
@pytest.mark.parametrize("cubin, kernel, launch", list(_hw_launches()))
def test_sliced_equals_full_on_the_hardware_families(cubin, kernel, launch):
    assert_same(cubin, launch, "auto", [f"^{re.escape(kernel)}$"])


def _measured_launches():
    sys.path.insert(0, str(REPO / "tests"))
    from test_hw_validation import _launch_params
    cuda = FIXTURES / "cuda"
    for launch in tomllib.load(open(cuda / "kernels.toml", "rb"))["launch"]:
        request_ = LaunchRequest(block=tuple(launch["block"]), grid=tuple(launch["grid"]),
                                 params=_launch_params(launch["params"]),
                                 dynamic_smem=launch.get("dynamic_shared_bytes", 0))
        path = cuda / f"{launch['file'].replace('.cu', '')}.sm_90.ptx"
        for level in ("ptx", "sass"):
            yield pytest.param(path, launch["kernel"], request_, level, id=f"{launch['id']}-{level}",
                               marks=[] if level == "ptx" else [needs_sass])


@pytest.mark.slow
@pytest.mark.parametrize("path, kernel, launch, level", list(_measured_launches()))
def test_sliced_equals_full_on_the_measured_kernels(path, kernel, launch, level):
    assert_same(path, launch, level, [f"^{re.escape(kernel)}$"])
