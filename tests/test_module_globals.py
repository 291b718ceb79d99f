"""Module globals (``__device__`` variables): their initial contents at both levels, the last-CTA election
followed with --data, and without --data an unresolved reason that names the variable (issue 21).

``tests/fixtures/emulate/module_globals.cu``: a zero-initialised counter elects the last CTA, an initialised
table decides two shared strides.  ``tests/fixtures/lastblock``: threadFenceReduction's single pass, measured
on the H100 (its per-pc SASS comparison is tests/test_hw_families.py)."""

from __future__ import annotations

import csv
import struct
from pathlib import Path

import numpy as np
import pytest

from traceconf import tools
from traceconf.emulate.launch import LaunchRequest
from traceconf.pipeline import run_file
from traceconf.rules import load_rule_set

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "emulate" / "module_globals"
LASTBLOCK = REPO / "tests" / "fixtures" / "lastblock"
LEVELS = [pytest.param(".sm_90.cubin", "sass", id="sass"), pytest.param(".sm_90.ptx", "ptx", id="ptx")]

pytestmark = pytest.mark.skipif(tools.locate("nvdisasm") is None, reason="needs nvdisasm (the cubin's listing)")


def _run(path: Path, level: str, request: LaunchRequest, kernel: str = ".*"):
    done, failed = run_file(path, [kernel], request, [load_rule_set("sm_90")], level=level)
    assert not failed, failed[0].line()
    return done[0]


def _totals(analysis) -> dict[str, tuple[int, int]]:
    totals: dict[str, list[int]] = {}
    for row in analysis.results.to_pylist():
        entry = totals.setdefault(row["kind"], [0, 0])
        entry[0] += row["wavefronts"]
        entry[1] += row["ideal_wavefronts"]
    return {kind: tuple(entry) for kind, entry in totals.items()}


def test_ptx_and_cubin_give_the_same_module_globals():
    from traceconf.ptx.parse import parse_file
    from traceconf.sass.binary import load_binary
    from traceconf.sass.emulate import reached_globals
    expected = [{"name": "counter", "bytes": 4, "init": None, "unknown": False},
                {"name": "table", "bytes": 16, "init": struct.pack("<4i", 3, -1, 7, 8), "unknown": False},
                {"name": "scale", "bytes": 4, "init": struct.pack("<f", 1.5), "unknown": False}]
    assert parse_file(FIXTURE.with_suffix(".sm_90.ptx")).module_globals("_Z7stridedPi")[:3] == expected
    cubin = load_binary(FIXTURE.with_suffix(".sm_90.cubin"))
    assert reached_globals(cubin, "_Z7stridedPi") == expected    # the globals its code reads, not `stores`
    # constant bank 4 holds their addresses once the loader's relocations are applied
    addresses = {"counter": 1 << 40, "table": 2 << 40, "scale": 3 << 40}
    bank = cubin.constant_banks("_Z7stridedPi", addresses)[4]
    words = {int.from_bytes(bank[offset:offset + 8], "little") for offset in range(0, len(bank), 8)}
    assert set(addresses.values()) <= words      # (the word of `stores`, not given here, stays 0)


@pytest.mark.parametrize("suffix, level", LEVELS)
def test_with_data_the_globals_initial_contents_decide_strides_and_the_election(suffix, level, tmp_path):
    np.save(tmp_path / "out.npy", np.zeros(256, np.int32))
    analysis = _run(FIXTURE.with_suffix(suffix), level,
                    LaunchRequest(block=(32, 1, 1), grid=(4, 1, 1), data={"0": str(tmp_path / "out.npy")}),
                    "_Z7stridedPi")
    assert not analysis.unresolved, analysis.unresolved
    # stride table[3] = 8: 8-way in every CTA (32); the am_last flag read by each CTA (4); the last CTA alone
    # reads at stride table[2] = 7 (1)
    assert _totals(analysis)["ld"] == (37, 9)
    assert any("counter = __device__ variable, 4 bytes, zero-initialised" in note for note in analysis.notes)


@pytest.mark.parametrize("suffix, level", LEVELS)
def test_without_data_the_reason_names_the_device_variables(suffix, level):
    analysis = _run(FIXTURE.with_suffix(suffix), level, LaunchRequest(block=(32, 1, 1), grid=(4, 1, 1)),
                    "_Z7stridedPi")
    reasons = {u["reason"] for u in analysis.unresolved}
    assert reasons and all("__device__ variables scale, table" in reason and "only with --data" in reason
                           for reason in reasons), reasons


@pytest.mark.parametrize("which, stride", [(0, 1), (1, 32)])
def test_a_call_through_a_device_table_is_followed_only_where_its_address_is_known(which, stride, tmp_path):
    """SASS: the table's initialiser holds the callees' addresses (with --data: the call is followed, 1 or
    32-way as the direct call); PTX: ``{store_unit, store_stride}`` are addresses this level does not know."""
    np.save(tmp_path / "out.npy", np.zeros(32, np.float32))
    request = LaunchRequest(block=(32, 1, 1), grid=(1, 1, 1), params={"1": which},
                            data={"0": str(tmp_path / "out.npy")})
    sass = _run(FIXTURE.with_suffix(".sm_90.cubin"), "sass", request, "pointer_table")
    assert not sass.unresolved and _totals(sass)["st"] == (stride, 1)
    ptx = _run(FIXTURE.with_suffix(".sm_90.ptx"), "ptx", request, "pointer_table")
    assert any("indirect call" in u["reason"] for u in ptx.unresolved)
    no_data = _run(FIXTURE.with_suffix(".sm_90.cubin"), "sass", LaunchRequest(
        block=(32, 1, 1), grid=(1, 1, 1), params={"1": which}), "pointer_table")
    assert no_data.unresolved and all("__device__ variable stores" in u["reason"] for u in no_data.unresolved)


def _lastblock_launches():
    for row in csv.DictReader(open(REPO / "tests" / "data" / "hw" / "lastblock" / "manifest.csv")):
        yield pytest.param(row, id=row["launch"])


def _lastblock_request(row: dict, data: bool) -> LaunchRequest:
    dims = [tuple(int(v) for v in row[key].split("x")) for key in ("block", "grid")]
    params = dict(pair.split("=", 1) for pair in row["params"].split(";"))
    given = {key: str(LASTBLOCK / name) for key, name in (p.split("=", 1) for p in row["data"].split(";"))}
    return LaunchRequest(block=dims[0], grid=dims[1], params=params, dynamic_smem=int(row["dynamic_smem"]),
                         data=given if data else {})


@pytest.mark.parametrize("row", list(_lastblock_launches()))
def test_the_last_block_reduction_is_exact_at_the_ptx_level_with_data(row):
    """The PTX level's totals equal the H100's Source page sums (the SASS level is compared per pc)."""
    analysis = _run(LASTBLOCK / "last_block_reduce.sm_90.ptx", "ptx", _lastblock_request(row, data=True),
                    f"^{row['kernel']}$")
    assert not analysis.unresolved, analysis.unresolved
    totals = _totals(analysis)
    assert (totals["ld"][0], totals["st"][0]) == (int(row["wf_ld"]), int(row["wf_st"]))
    assert (totals["ld"][1], totals["st"][1]) == (int(row["ideal_ld"]), int(row["ideal_st"]))


@pytest.mark.parametrize("suffix, level", LEVELS)
@pytest.mark.parametrize("row", list(_lastblock_launches()))
def test_the_last_block_election_without_data_names_the_counter(row, suffix, level):
    analysis = _run(LASTBLOCK / f"last_block_reduce{suffix}", level, _lastblock_request(row, data=False),
                    f"^{row['kernel']}$")
    assert analysis.unresolved
    assert all("__device__ variable retirement_count" in u["reason"] for u in analysis.unresolved)


@pytest.mark.parametrize("code, reached", [
    ("LDC.64 R2, c[0x4][RZ] ;", ["counter"]),                         # word 0
    ("LDC.64 R2, c[0x4][0x8] ;", ["table"]),
    ("LDC.64 R2, c[0x4][0x8+R4] ;", ["counter", "table", "scale"]),  # indexed by a register: any of them
    ("CALL.REL.NOINC 0x40 ;", ["counter", "table", "scale"]),         # a callee's reads are not listed here
    ("LDC R2, c[0x0][0x210] ;", []),                                  # a bank without relocations
])
def test_the_globals_a_kernels_code_reaches_through_its_constant_banks(code, reached):
    """The SASS operand parser reads the constant-bank words (one parser for c[bank][word]); the opcode table says
    what a call is."""
    from traceconf.sass.emulate import reached_globals
    from traceconf.sass.listing import parse_text
    module = parse_text(f"\tcode for sm_90\n\t\tFunction : k\n        /*0000*/                   {code}\n"
                        "        /*0010*/                   EXIT ;\n")
    module.globals = [{"name": name, "bytes": 8, "init": None, "unknown": False} for name in ("counter", "table", "scale")]
    module.relocations = {"": {4: [(0, "counter", 0, 8), (8, "table", 0, 8), (16, "scale", 0, 8)]}}
    assert [v["name"] for v in reached_globals(module, "k")] == reached


def test_the_globals_a_ptx_kernel_reaches_are_those_its_symbol_operands_name(tmp_path):
    """A register (PTX registers need no ``%``), an address through one, a label or a called function spelled
    like a module global does not reach it; a symbol operand, an element or an address base does, in the kernel or in a function it calls."""
    from traceconf.emulate.driver import reached_globals
    from traceconf.emulate.program import link
    from traceconf.ptx.parse import parse_file
    path = tmp_path / "k.ptx"
    path.write_text("""
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 counter;
.global .align 4 .b8 table[16];
.global .align 4 .u32 scale;
.global .align 4 .u32 lost;
.global .align 4 .u32 unused;
.func helper()
{
    .reg .b64 %rd<2>;
    mov.u64 %rd1, table;
    ret;
}
.visible .entry k()
{
    .reg .b32 scale;
    .reg .b64 unused;
    .reg .b32 %r<4>;
    mov.u32 scale, 1;
    mov.u64 unused, 0;
    ld.global.u32 %r3, [unused];
    ld.global.u32 %r1, [counter+4];
    ld.global.u32 %r2, lost[1];
    call helper;
lost_label:
    ret;
}
""")
    module = parse_file(path)
    names = [variable["name"] for variable in reached_globals(module, link(module, "k", str(path)))]
    assert names == ["counter", "table", "lost"]


def test_an_address_lies_in_the_module_global_whose_spacing_holds_it():
    from traceconf.emulate.contents import BUFFER_SPACING, module_global_addresses, module_globals_holding
    addresses = module_global_addresses([{"name": name} for name in ("table", "counter", "scale")])
    table, counter = np.uint64(addresses["table"]), np.uint64(addresses["counter"])
    assert module_globals_holding(addresses, np.array([table + np.uint64(BUFFER_SPACING - 1)])) == ["table"]
    assert module_globals_holding(addresses, np.array([table, counter], dtype=np.uint64)) == ["counter", "table"]
    assert module_globals_holding(addresses, np.array([counter + np.uint64(BUFFER_SPACING)])) == []     # past all
    assert module_globals_holding(addresses, np.array([], dtype=np.uint64)) == []
