"""The CI gate (``--fail-on-excess N``): whether a run's results pass, and why not, in one verdict.

Exit statuses are the CLI's business; the verdict says which kind of failure it is: ``over`` (some kernel's
excess wavefronts exceed the limit), ``cannot_vouch`` (an emulation stopped at a limit, or accesses are
unresolved and not allowed), or none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from traceconf.analyses.results import excess_by_kernel, unresolved_summary
from traceconf.names import readable
from traceconf.pipeline import KernelAnalysis


@dataclass
class GateVerdict:
    """What the gate found: ``failure`` is None (pass), ``"over"`` or ``"cannot_vouch"``; ``reasons`` are
    one line each."""

    failure: str | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.failure is None


def gate(analyses: list[KernelAnalysis], table: pa.Table, limit: int, allow_unresolved: bool = False) -> GateVerdict:
    """Judge the results (``table``: RESULT_ROWS of ``analyses``) against ``--fail-on-excess limit``."""
    over = [(k, d, e) for k, d, e in excess_by_kernel(table) if e > limit]
    if over:
        return GateVerdict("over", [f"kernel {readable(kernel)} on {device} has {excess:,} excess wavefronts (limit "
                                    f"--fail-on-excess {limit})" for kernel, device, excess in over])
    stopped = [readable(analysis.kernel) for analysis in analyses if "partial" in analysis.launch]
    if stopped:
        return GateVerdict("cannot_vouch", [
            f"--fail-on-excess cannot vouch for {', '.join(stopped)}: the emulation stopped at a limit before it "
            "covered every CTA (raise --work-limit / --memory-limit)"])
    summaries = [s for s in (unresolved_summary(analysis) for analysis in analyses) if any(s)]
    if summaries and not allow_unresolved:
        counted, uncounted = sum(s[0] for s in summaries), sum(s[1] for s in summaries)
        return GateVerdict("cannot_vouch", [
            f"--fail-on-excess cannot vouch for unresolved accesses: {counted:,} warp-level execution(s) "
            "unresolved" + (f", plus {uncounted} instruction(s) whose executions could not be counted"
                            if uncounted else "")
            + "; resolve them with --data (buffer contents) or --param, or pass --allow-unresolved"])
    return GateVerdict()
