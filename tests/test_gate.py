"""The CI gate as a library function (``traceconf.analyses.gate``): the CLI's --fail-on-excess renders it."""

from __future__ import annotations

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
