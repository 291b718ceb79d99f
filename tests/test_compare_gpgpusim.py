"""compare-gpgpusim: GPGPU-Sim's per-PTX-line smem_bk_conflicts beside the prediction.

Fixtures in tests/fixtures/gpgpusim/ are written by hand in GPGPU-Sim's exact
format (``ptx_file_line_stats_write_file``: header, then ``FILE LINE : `` and
nine counters each followed by a space, in hash-map order), with counts derived
from GPGPU-Sim's rule (trace_formats.md §2.2, shipped configs: 32 banks,
-gpgpu_shmem_warp_parts 1, no limited broadcast; cycles per warp instruction =
most distinct 4-byte words in one bank):

transpose_inst_stats.txt — tests/fixtures/emulate/transpose.ptx, block 32x8,
grid 2: 2 CTAs x 8 warps = 16 warp instructions (512 threads) per line; warp w
is threadIdx.y = w, its lanes threadIdx.x = 0..31.
  * transpose_unpadded stores, lines 56/61/64/67: tile[ty+j][tx] at
    (ty+j)*128 + tx*4 -> 32 consecutive words, 32 banks once each -> 1 cycle per
    warp -> smem_bk_conflicts 16, smem_warp 16.
  * transpose_unpadded loads, lines 81/86/91/94: tile[tx][ty+j] at
    tx*128 + (ty+j)*4 -> 32 distinct words all in bank (ty+j) % 32 -> 32 cycles
    per warp -> 512.
  * transpose_padded stores (140/145/148/151) and loads (164/169/174/177): row of
    33 words, load word tx*33 + ty + j has bank (tx + ty + j) % 32, distinct over
    tx -> 1 cycle per warp -> 16 each.
  * lines 55 (ld.global) and 72 (bar.sync) carry no shared counters, as in a
    real file (they must not appear in the comparison).
  Totals: 256 warp instructions, 8 store lines x 16 + 4 x 512 + 4 padded loads x 16
  = 2,240 cycles.

strides_inst_stats.txt — tests/fixtures/cuda/strides.sm_90.ptx, kernel
stride_words<2>, block 64, grid 2: 4 warps per line; tile[tid*2] puts lane l at
word 2l, bank 2l % 32, so lanes l and l+16 share a bank in different words ->
2 cycles per warp -> 8 on the store (line 95) and on the load (line 99).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from traceconf.cli import app
from traceconf.errors import InputError
from traceconf.analyses.gpgpusim import BankModel, closest_rule_set, model_cycles, rows_for_ptx
from traceconf.traces import read_gpgpusim_stats

STATS = FIXTURES / "gpgpusim"
TRANSPOSE = FIXTURES / "emulate" / "transpose.ptx"
STRIDES = FIXTURES / "cuda" / "strides.sm_90.ptx"
LAUNCH = ["--block", "32,8", "--grid", "2"]
UNPADDED_LINES = [56, 61, 64, 67, 81, 86, 91, 94]
PADDED_LINES = [140, 145, 148, 151, 164, 169, 174, 177]


def invoke(*args: str):
    return CliRunner().invoke(app, ["compare-gpgpusim", *map(str, args)])


def transpose_json(*extra: str) -> dict:
    result = invoke(STATS / "transpose_inst_stats.txt", TRANSPOSE, *LAUNCH, "--format", "json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_lines_match_shared_instructions_and_counts():
    doc = transpose_json("-d", "sm_90", "-d", "sm_3x")
    lines = {row["ptx_line"]: row for row in doc["lines"]}
    assert sorted(lines) == UNPADDED_LINES + PADDED_LINES        # 55 (ld.global) and 72 (bar.sync) left out
    for number in UNPADDED_LINES + PADDED_LINES:
        row = lines[number]
        assert row["ptx"].startswith(("ld.shared.f32", "st.shared.f32"))
        ways = 32 if number in (81, 86, 91, 94) else 1
        assert row["gpgpusim"]["smem_warp"] == 16
        assert row["gpgpusim"]["smem_bk_conflicts"] == 16 * ways
        assert row["gpgpusim"]["extra_cycles"] == 16 * (ways - 1)
        assert row["model"] == {"warps": 16, "cycles": 16 * ways}
        assert row["model_delta"] == 0
        # sm_90 counts 4-byte accesses like GPGPU-Sim's shipped configs
        assert row["predicted"]["sm_90"] == {"executions": 16, "wavefronts": 16 * ways,
                                             "excess_wavefronts": 16 * (ways - 1)}
        assert row["delta"]["sm_90"] == 0
    # sm_3x's 256-byte bank rows put words i and i+32 in one pass: the 32-way column read becomes 16-way
    assert lines[81]["predicted"]["sm_3x"]["wavefronts"] == 16 * 16
    assert lines[81]["delta"]["sm_3x"] == 16 * 16 - 512
    assert lines[81]["kernel"] == "transpose_unpadded" and lines[164]["kernel"] == "transpose_padded"


def test_totals_and_json_shape():
    doc = transpose_json("-d", "sm_90", "-d", "sm_3x")
    assert set(doc) == {"stats", "ptx", "ptx_name", "gpgpusim_options", "devices", "closest_device", "counts",
                        "lines", "totals", "notes"}
    assert doc["ptx_name"] == "transpose.ptx"
    assert doc["devices"] == ["sm_90", "sm_3x"]
    assert doc["gpgpusim_options"] == {"gpgpu_shmem_num_banks": 32, "gpgpu_shmem_warp_parts": 1,
                                       "gpgpu_shmem_limited_broadcast": 0}
    assert doc["closest_device"]["device"] == "sm_50"
    cycles = 8 * 16 + 4 * 512 + 4 * 16
    totals = doc["totals"]
    assert totals["gpgpusim"] == {"count": 16 * 512, "smem_warp": 256, "smem_bk_conflicts": cycles,
                                  "extra_cycles": cycles - 256}
    assert totals["model"] == {"warps": 256, "cycles": cycles}
    assert totals["predicted"]["sm_90"]["wavefronts"] == cycles
    assert totals["delta"] == {"sm_90": 0, "sm_3x": -4 * 256}
    assert totals["model_delta"] == 0
    assert doc["notes"] == []


def test_csv_and_table_outputs():
    result = invoke(STATS / "transpose_inst_stats.txt", TRANSPOSE, *LAUNCH, "--format", "csv")
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split(",")[:6] == ["ptx_line", "kernel", "kind", "width_bits", "ptx", "gpgpusim_count"]
    assert header.endswith("sm_90_executions,sm_90_wavefronts,sm_90_excess_wavefronts,sm_90_delta")
    assert len(rows) == 16 and rows[4].startswith("81,transpose_unpadded,ld,32,")
    table = invoke(STATS / "transpose_inst_stats.txt", TRANSPOSE, *LAUNCH)
    assert table.exit_code == 0
    assert "2,240" in table.stdout and "--device sm_50" in table.stdout


def test_unselected_kernel_lines_are_flagged():
    doc = transpose_json("-k", "transpose_unpadded")
    padded = [row for row in doc["lines"] if row["ptx_line"] in PADDED_LINES]
    assert len(padded) == 8 and all(row["predicted"] is None and row["delta"] is None for row in padded)
    assert doc["totals"]["predicted"]["sm_90"]["wavefronts"] == 4 * 16 + 4 * 512
    assert any("not shared-memory instructions" in note and "140" in note for note in doc["notes"])


def test_builtin_defaults_change_the_model():
    """16 banks, 2 warp parts, limited broadcast (GPGPU-Sim's built-in defaults): stores cost a pass per half-warp."""
    doc = transpose_json("-k", "transpose_unpadded", "--shmem-banks", "16", "--shmem-warp-parts", "2",
                         "--shmem-limited-broadcast", "-d", "sm_1x")
    lines = {row["ptx_line"]: row for row in doc["lines"]}
    assert lines[56]["model"]["cycles"] == 32 and lines[56]["model_delta"] == 16
    assert lines[81]["model"]["cycles"] == 512           # 16 distinct words in bank ty%16 per half-warp
    assert lines[56]["predicted"]["sm_1x"]["wavefronts"] == 32
    assert doc["closest_device"]["device"] == "sm_1x"


def test_other_ptx_file():
    result = invoke(STATS / "strides_inst_stats.txt", STRIDES, "-k", "_Z12stride_wordsILi2EEvPKfPf",
                    "--block", "64", "--grid", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(r["ptx_line"], r["gpgpusim"]["smem_bk_conflicts"], r["model"]["cycles"], r["delta"]["sm_90"])
            for r in doc["lines"]] == [(95, 8, 8, 0), (99, 8, 8, 0)]


def test_names_do_not_match():
    result = invoke(STATS / "strides_inst_stats.txt", TRANSPOSE, *LAUNCH)
    assert result.exit_code == 2
    assert "strides_inst_stats.txt: no statistics for transpose.ptx (the file holds: strides.sm_90.ptx)" \
        in result.output
    assert "--ptx-name" in result.output and "Traceback" not in result.output


def test_ptx_name_picks_the_file(tmp_path):
    """GPGPU-Sim calls extracted PTX _1.ptx: --ptx-name lines it up with a copy under another name."""
    renamed = tmp_path / "gpgpu_inst_stats.txt"
    renamed.write_text((STATS / "transpose_inst_stats.txt").read_text().replace("transpose.ptx", "_1.ptx"))
    assert invoke(renamed, TRANSPOSE, *LAUNCH).exit_code == 2
    result = invoke(renamed, TRANSPOSE, *LAUNCH, "--ptx-name", "_1.ptx", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["delta"] == {"sm_90": 0}


@pytest.mark.parametrize("text, line", [
    ("kernel line : count latency\n", 1),
    ("kernel line : count latency dram_traffic smem_bk_conflicts smem_warp gmem_access_generated gmem_warp "
     "exposed_latency warp_divergence\ntranspose.ptx 56 : 512 1152 0 16 16 0 0 96 0\ntranspose.ptx 61 : 512 x\n", 3),
])
def test_malformed_stats_exit_2_with_location(tmp_path, text, line):
    bad = tmp_path / "gpgpu_inst_stats.txt"
    bad.write_text(text)
    result = invoke(bad, TRANSPOSE, *LAUNCH)
    assert result.exit_code == 2
    assert f"{bad}:{line}:1:" in result.output and "Traceback" not in result.output


def test_not_ptx_is_rejected():
    result = invoke(STATS / "transpose_inst_stats.txt", STATS / "strides_inst_stats.txt")
    assert result.exit_code == 2 and "not a PTX file (detected: gpgpusim_stats)" in result.output


def test_bad_model_options():
    result = invoke(STATS / "transpose_inst_stats.txt", TRANSPOSE, *LAUNCH, "--shmem-warp-parts", "3")
    assert result.exit_code == 2 and "must divide the warp size 32" in result.output


# ----------------------------------------------------------------------------- the replayed rule
def _warps() -> np.ndarray:
    """The worked vectors of trace_formats.md §6 (from real Accel-Sim lines)."""
    address = np.full((4, 32), -1, dtype=np.int64)
    address[0, 16:] = 0x800 + 64 * np.arange(16)   # lud LDS.U, lanes 16-31, stride 64 B
    address[1, 16:] = 0                             # lud LDS.U.128, 16 lanes one address
    address[2] = 0x1000 + 4 * np.arange(32)         # matrixmul LDS.U.32, stride 4 B
    address[3] = 0                                  # matrixmul LDS.U.128 broadcast
    return address


def test_model_matches_documented_vectors():
    assert model_cycles(_warps()).tolist() == [8, 1, 1, 1]
    assert model_cycles(_warps(), BankModel(16, 2, True)).tolist() == [16, 1, 2, 2]


def test_limited_broadcast_merges_one_word_only():
    address = np.full((1, 32), -1, dtype=np.int64)
    address[0, :4] = 0        # word 0, bank 0, four lanes: the broadcast word
    address[0, 4:7] = 4       # word 1, bank 1, three lanes: each counts
    address[0, 7] = 128       # word 32, bank 0
    assert model_cycles(address).tolist() == [2]                                      # distinct words: bank 0 has 2
    assert model_cycles(address, BankModel(32, 1, True)).tolist() == [3]              # bank 1: three requests
    assert model_cycles(np.full((2, 32), -1, dtype=np.int64)).tolist() == [0, 0]      # predicated off


def test_closest_rule_set():
    assert closest_rule_set(BankModel())[0] == "sm_50"
    assert closest_rule_set(BankModel(16, 2, True))[0] == "sm_1x"


def test_rows_for_ptx_compares_base_names():
    stats = read_gpgpusim_stats(STATS / "transpose_inst_stats.txt")
    assert rows_for_ptx(stats, "/some/where/transpose.ptx", "s.txt").num_rows == 18
    with pytest.raises(InputError, match="no statistics for other.ptx"):
        rows_for_ptx(stats, "other.ptx", "s.txt")
