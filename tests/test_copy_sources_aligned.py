"""A pointer parameter without a value: the copies' global sources taken at cudaMalloc's alignment
(traceconf.emulate.allocation), so that LDGSTS.BYPASS is counted from them as Nsight counts it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from test_emulate_support import kernel_text
from traceconf import tools
from traceconf.emulate import taint
from traceconf.emulate.allocation import (ALIGNMENT, OFFSET_RANGE, STAND_IN_FLOOR, copy_sources, stand_in,
                                          value_without_param)

U64 = np.uint64
ASSUMED = "256-byte aligned as cudaMalloc returns them"


def test_stand_ins_are_aligned_user_addresses_far_from_each_other():
    bases = [value_without_param(index, 8) for index in range(taint.MAX_TRACKED_PARAMS - 1)]
    assert all(base % ALIGNMENT == 0 and STAND_IN_FLOOR <= base < 2 * STAND_IN_FLOOR for base in bases)
    assert min(abs(a - b) for a, b in itertools.combinations(bases, 2)) > 2 * OFFSET_RANGE
    # a 32-bit parameter, and the last bit (shared by every later parameter): no stand-in
    assert value_without_param(0, 4) == 0 and value_without_param(taint.MAX_TRACKED_PARAMS - 1, 8) == 0


def test_a_source_is_an_offset_from_one_pointer_or_unknown():
    """Warps of 4 lanes: (0) offsets from parameter 0; (1) known addresses; (2) one lane known, the others offsets:
    no common base; (3) a scaled pointer, another pointer's offsets, two pointers added, a loaded address."""
    p0, p1, loaded = taint.missing_param(0), taint.missing_param(1), taint.LOADED
    base0, base1 = stand_in(0), stand_in(1)
    value = np.array([base0, base0 + 16, base0 - 64, base0 + (1 << 31),
                      4096, 4112, 4128, 4144,
                      4096, base0, base0 + 16, base0 + 32,
                      2 * base0, base1 + 16, base0 + base1, 4096], dtype=U64)
    bits = np.array([p0] * 4 + [0] * 4 + [0, p0, p0, p0] + [p0, p1, p0 | p1, loaded], dtype=U64)
    lanes = np.ones(16, dtype=bool)
    sources, assumed = copy_sources(value, bits, lanes, 4)
    expected = value.view(np.int64).tolist()[:8] + [-1] * 4 + [-1, base1 + 16, -1, -1]
    assert sources.tolist() == expected and assumed == int(p0 | p1)
    # lanes that do not read take no part: warp 2 without its known lane is parameter 0's
    lanes[8] = False
    sources, _ = copy_sources(value, bits, lanes, 4)
    assert sources[8:12].tolist() == [-1, base0, base0 + 16, base0 + 32]


def _copy_kernel(tmp_path, pointer: str = "") -> str:
    """Lane l copies 16 bytes from p + 48 + 16 l (``pointer``: what is done to p first) to shared byte 16 l."""
    body = f"""
        ld.param.u64 %rd1, [p];
        {pointer}
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 4;
        mov.u32 %r3, buf;
        add.u32 %r2, %r2, %r3;
        mul.wide.u32 %rd2, %r1, 16;
        add.u64 %rd3, %rd1, %rd2;
        cp.async.cg.shared.global [%r2], [%rd3+48], 16;
        cp.async.wait_all;
        ret;"""
    path = tmp_path / "copy.ptx"
    path.write_text(kernel_text(body, params=".param .u64 p", shared=".shared .align 16 .b8 buf[1024];\n"))
    return str(path)


LEVELS = ["ptx", pytest.param("sass", marks=pytest.mark.skipif(
    tools.locate("ptxas") is None or tools.locate("nvdisasm") is None, reason="needs ptxas and nvdisasm"))]


def _analysed(path: str, level: str, params: dict):
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.pipeline import run_file
    from traceconf.rules import load_rule_set

    (analysis,), failed = run_file(path, ["k"], LaunchRequest(block=(32, 1, 1), params=params),
                                   [load_rule_set("sm_90")], level=level)
    assert not failed and not analysis.unresolved
    (copy,) = [row for row in analysis.results.to_pylist() if row["kind"] == "cp_async"]
    return copy["wavefronts"], analysis.model_notes.get("sm_90", {}).get(copy["instruction"], ""), analysis.notes


@pytest.mark.parametrize("level", LEVELS)
def test_a_pointer_without_a_value_is_taken_at_the_start_of_an_allocation(tmp_path, level):
    """Sources 48 bytes into an aligned allocation: 16 per warp from the sources (the probe's src_rot3), where the
    shared addresses give 4; the note says what was assumed, and --param gives the real address."""
    path = _copy_kernel(tmp_path)
    wavefronts, note, notes = _analysed(path, level, {})
    assert wavefronts == 16 and ASSUMED in note and "parameter p without a value" in note
    assert any("offsets from parameter p" in n and "256-byte-aligned allocation" in n for n in notes)
    # a real address aligned as cudaMalloc's: the same count, no assumption; 80 bytes further: the sources aligned
    for address, expected in ((1 << 40, 16), ((1 << 40) + 80, 4)):
        wavefronts, note, notes = _analysed(path, level, {"p": address})
        assert wavefronts == expected and ASSUMED not in note and not any("cudaMalloc" in n for n in notes)


@pytest.mark.parametrize("pointer", ["shl.b64 %rd1, %rd1, 1;", "and.b64 %rd1, %rd1, 4095;", "shr.u64 %rd1, %rd1, 4;"])
def test_a_source_computed_otherwise_from_the_pointer_stays_unknown(tmp_path, pointer):
    """Not the pointer plus an offset: the copy keeps the shared-address count and its note."""
    wavefronts, note, notes = _analysed(_copy_kernel(tmp_path, pointer), "ptx", {})
    assert wavefronts == 4 and note.startswith("Nsight's Source page counts") and not any("cudaMalloc" in n
                                                                                        for n in notes)


@pytest.mark.parametrize("param, assumed", [([], True), (["--param", "p=0x10000000000"], False)])
def test_explain_states_the_assumption(tmp_path, param, assumed):
    from typer.testing import CliRunner

    from traceconf.cli import app

    result = CliRunner().invoke(app, ["explain", _copy_kernel(tmp_path), "-k", "k", "-i", "L21", "--level", "ptx",
                                      "--block", "32", *param], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert "16 wavefronts, ideal 4" in result.stdout and "counted from the global source" in result.stdout
    assert (ASSUMED in " ".join(result.stdout.split())) == assumed
