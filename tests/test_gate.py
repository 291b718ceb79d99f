"""The CI gate as a library function (``traceconf.analyses.gate``): the CLI's --fail-on-excess renders it."""

from __future__ import annotations

from pathlib import Path

from test_report_support import SCALE, transpose_analysis
from traceconf.analyses.gate import gate
from traceconf.analyses.results import results_table

EXCESS = 4 * 8 * 31 * SCALE          # the unpadded transpose's column stores: 32-way on 4 × 8 warps


def test_over_the_limit_names_each_kernel_and_device():
    analyses = [transpose_analysis(), transpose_analysis("transpose_padded", row_words=33)]
    table = results_table(analyses, ["sm_90"])
    verdict = gate(analyses, table, EXCESS - 1)
    assert verdict.failure == "over" and not verdict.passed
    assert verdict.reasons == [f"kernel transpose_unpadded on sm_90 has {EXCESS:,} excess wavefronts "
                               f"(limit --fail-on-excess {EXCESS - 1})"]


def test_unresolved_accesses_cannot_be_vouched_for_unless_allowed():
    analyses = [transpose_analysis()]
    analyses[0].unresolved[0]["executions"] = 5
    table = results_table(analyses, ["sm_90"])
    verdict = gate(analyses, table, EXCESS)
    assert verdict.failure == "cannot_vouch" and "5 warp-level execution(s) unresolved" in verdict.reasons[0]
    assert gate(analyses, table, EXCESS, allow_unresolved=True).passed


def test_a_stopped_emulation_cannot_be_vouched_for():
    analyses = [transpose_analysis()]
    analyses[0].launch["partial"] = "stopped at the time limit"
    verdict = gate(analyses, results_table(analyses, ["sm_90"]), EXCESS)
    assert verdict.failure == "cannot_vouch" and "transpose_unpadded" in verdict.reasons[0]


def test_the_gate_names_a_cpp_kernel_readably_with_its_mangled_name_to_select_it():
    """A CI log reads ``transpose_tile<0> (_Z14transpose_tileILi0EEvPfPKfi)`` (issue 24, item 7)."""
    from typer.testing import CliRunner

    from traceconf.cli import app

    cuda = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "cuda"
    result = CliRunner().invoke(app, ["analyze", str(cuda / "transpose.sm_90.ptx"), "--block", "32,8", "--grid",
                                      "32,32", "-p", "2=1024", "--fail-on-excess", "0", "-f", "json"])
    assert result.exit_code == 1
    assert "kernel transpose_tile<0> (_Z14transpose_tileILi0EEvPfPKfi) on sm_90 has 1,015,808 excess" in result.output
