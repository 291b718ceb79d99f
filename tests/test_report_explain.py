"""explain: phases, passes and lanes of one execution; terminal grid and SVG."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from conftest import shared_path
from test_report_support import LOADS, STORES, info_rows, tile_accesses
from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.cli import app
from traceconf.analyses.lookup import resolve_instruction
from traceconf.engine import lane_wavefronts
from traceconf.errors import InputError
from traceconf.report.explain import (choose_row, execution_at, executions_of, picture,
                                      render_terminal)
from traceconf.report.svg import render_svg
from traceconf.rules import load_rule_set
from traceconf.schemas import KIND_CODES


def explained(address, kind="ld", nbytes=4, matrices=0, device="sm_90"):
    rules = load_rule_set(device)
    address = np.asarray(address, dtype=np.int64)
    acc = WarpAccesses("k", np.zeros(1, np.int64), np.zeros(1, np.int32), np.zeros(1, np.int64),
                       np.zeros(1, np.int32), np.array([KIND_CODES[kind]], np.int8), np.array([nbytes], np.int16),
                       np.array([matrices], np.int8), address[None, :])
    return picture(execution_at(acc, 0, 0, "ld.shared", device), rules, lane_wavefronts(acc, rules))


def test_column_walk_is_one_phase_of_32_passes():
    pic = explained(np.arange(32) * 128)
    assert pic.phases == [tuple(range(32))]
    assert pic.phase_wavefronts == [32] == [pic.wavefronts]
    assert set(pic.bank.tolist()) == {0}
    assert pic.wave.tolist() == list(range(32))  # lane l is served in pass l
    assert pic.conflicting().all()


def test_128_bit_contiguous_is_four_quarter_warp_phases():
    pic = explained(np.arange(32) * 16, nbytes=16)
    assert pic.phases == [tuple(range(q, q + 8)) for q in range(0, 32, 8)]
    assert pic.phase_wavefronts == [1, 1, 1, 1] and pic.wavefronts == 4
    assert len(pic.lane) == 32 * 4  # each lane covers four banks
    assert not pic.conflicting().any()


def test_128_bit_broadcast_pairs_into_half_warps():
    pic = explained(np.zeros(32), nbytes=16)
    assert [len(p) for p in pic.phases] == [16, 16] and pic.wavefronts == 2


def test_ldmatrix_phase_per_matrix():
    rows = np.arange(32) * 128
    pic = explained(rows, kind="ldmatrix", nbytes=16, matrices=4)
    assert pic.phases == [tuple(range(j, j + 8)) for j in range(0, 32, 8)]
    assert pic.phase_wavefronts == [8] * 4 and pic.wavefronts == 32 and pic.ideal_wavefronts == 4


def test_inactive_lanes_are_left_out():
    address = np.arange(32) * 4
    address[16:] = INACTIVE
    pic = explained(address)
    assert pic.phases == [tuple(range(16))] and sorted(set(pic.lane.tolist())) == list(range(16))


def test_half_warp_single_word_broadcast_rows_are_the_engine_steps():
    # sm_1x: lanes 4k..4k+3 read the four bytes of word k.  One word is broadcast per step (most lanes
    # first), every other bank serves its lowest lane: 4, 3+1, 2+1+1, 1+1+1+1 lanes over 4 steps.  (The
    # old picture drew one row of distinct words and a note that the rules count 4.)
    pic = explained(np.r_[np.arange(16), np.full(16, INACTIVE)], nbytes=1, device="sm_1x")
    assert [len(p) for p in pic.phases] == [16]
    assert pic.wavefronts == len(pic.rows) == 4 and pic.max_ways == 4
    served = {lane: wave for lane, wave in zip(pic.lane.tolist(), pic.wave.tolist())}
    assert [served[lane] for lane in range(16)] == [0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 2, 2, 0, 1, 2, 3]
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(render_terminal(pic))
    text = console.export_text()
    assert "rules count" not in text and "p0 wf3" in text
    assert "bank 3: 1 distinct word from lanes 12–15 → 4-way" in text


def test_split_requests_and_extra_wavefronts_are_rows():
    # sm_1x splits a 64-bit access into two 32-bit requests; each half-warp is one pass per request.
    pic = explained(np.arange(32) * 8, nbytes=8, device="sm_1x")
    assert pic.requests == 2 and pic.wavefronts == len(pic.rows) == 8
    assert [pic.label(k) for k in range(len(pic.rows))][:3] == ["r0 p0 wf0", "r0 p0 wf1", "r0 p1 wf0"]
    assert sorted(pic.word[(pic.lane == 3)].tolist()) == [6, 7]        # word a/4 in r0, a/4 + 1 in r1
    # Fermi 128-bit: every active quarter-warp pays one extra pass, drawn as an empty row.
    fermi = explained(np.arange(32) * 16, nbytes=16, device="sm_2x")
    assert fermi.wavefronts == len(fermi.rows) == 8 and sum(row.extra for row in fermi.rows) == 4
    assert not np.isin(fermi.wave, [k for k, row in enumerate(fermi.rows) if row.extra]).any()
    console = Console(width=250, file=io.StringIO(), record=True)
    console.print(render_terminal(fermi))
    assert "p0 wf1 extra" in console.export_text()
    ET.fromstring(render_svg(fermi))


def test_terminal_grid_names_the_conflict():
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(render_terminal(explained(np.arange(32) * 128)))
    text = console.export_text()
    assert "32 wavefronts, ideal 1, excess 31, worst 32-way" in text
    assert "bank 0: 32 distinct words from lanes 0–31 → 32-way" in text
    assert "p0 wf31" in text and "31→b0/w992" in text


def test_svg_is_well_formed_and_highlights_conflicts():
    svg = render_svg(explained(np.arange(32) * 128))
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert svg.count('stroke="#d62728"') == 32
    assert "lanes 5 · word 160 · bank 0 · conflict" in svg
    clean = render_svg(explained(np.arange(32) * 4))
    assert 'stroke="#d62728"' not in clean


def test_choose_row_default_is_the_worst_execution():
    acc = tile_accesses()
    rows = executions_of(acc, LOADS[0])
    wavefronts = np.arange(len(rows))
    row, ordinal = choose_row(acc, rows, wavefronts, None, None)
    assert row == rows[-1] and acc.warp[row] == 7 and ordinal == 0
    row, ordinal = choose_row(acc, rows, wavefronts, 3, 0)
    assert acc.warp[row] == 3
    with pytest.raises(LookupError, match="--execution must be 0..0"):
        choose_row(acc, rows, wavefronts, 3, 1)
    with pytest.raises(LookupError, match="warp 9 never executes"):
        choose_row(acc, rows, wavefronts, 9, None)


@pytest.mark.parametrize("spec, expected", [("30", 30), ("L111", 34), ("transpose.cu:12", STORES[0]),
                                            (":17", LOADS[0])])
def test_resolve_instruction(spec, expected):
    ident, others = resolve_instruction(info_rows("k"), spec, "k.ptx")
    assert ident == expected
    if spec.endswith(":12"):
        assert others == list(STORES[1:])


def test_resolve_instruction_errors():
    with pytest.raises(InputError, match="no shared-memory instruction"):
        resolve_instruction(info_rows("k"), "L999", "k.ptx")
    with pytest.raises(InputError, match="expected an instruction id"):
        resolve_instruction(info_rows("k"), "ld.shared", "k.ptx")


def test_explain_cli_on_a_real_accelsim_trace(tmp_path):
    trace = shared_path("traces", "microgpusim-matrixmul", "kernelslist.g")
    out = tmp_path / "e.svg"
    result = CliRunner().invoke(app, ["explain", str(trace), "-k", "mult_gpu", "-i", "0x278", "--svg", str(out)])
    assert result.exit_code == 0, result.output
    assert "LDS.U.128" in result.stdout and "2 wavefronts, ideal 2, excess 0" in result.stdout
    ET.fromstring(out.read_text())
    missing = CliRunner().invoke(app, ["explain", str(trace), "-k", "mult_gpu", "-i", "0x999"])
    assert missing.exit_code == 2 and "no shared-memory instruction" in missing.stderr



def test_explain_names_the_choices_when_kernel_or_instruction_is_wrong():
    from pathlib import Path
    trace = Path(__file__).resolve().parents[1] / "traces" / "accelsim-v4-mode0.traceg"
    kernel = CliRunner().invoke(app, ["explain", str(trace), "-k", "bank_patterns_x", "-i", "0x10"])
    assert kernel.exit_code == 2 and "did you mean 'bank_patterns'?" in kernel.stderr
    instruction = CliRunner().invoke(app, ["explain", str(trace), "-k", "bank_patterns", "-i", "1"])
    assert instruction.exit_code == 2
    assert "no shared-memory instruction of the kernel matches; it has 16 (0x10), 32 (0x20)," in instruction.stderr
