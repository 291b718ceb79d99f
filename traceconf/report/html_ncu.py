"""The ``compare-ncu`` report page: Nsight Compute's measured counts beside the prediction, per kernel, SASS
instruction, kind and CUDA line, every differing cell marked; then the kernel's section as ``analyze``'s page
draws it (:mod:`traceconf.report.html`)."""

from __future__ import annotations

from html import escape

from traceconf.analyses.ncu import Comparison
from traceconf.pipeline import KernelAnalysis
from traceconf.report.ncu import pc_label
from traceconf.report.html import DEFAULT_PICTURES, KernelPage, document, kernel_options, notes_box, number_cell


def _compare_table(title: str, label: str, rows: list[tuple[str, dict | None, dict]], key: str) -> str:
    head = "".join(f'<th class="n first-of-device">{n} ncu</th><th class="n">{n} predicted</th>'
                   for n in ("wavefronts", "ideal", "excess"))
    body = []
    for rank, (name, measured, predicted) in enumerate(rows, 1):
        cells = [f'<td class="text">{escape(str(name))}</td>']
        mismatch = False
        for count in ("wavefronts", "ideal_wavefronts", "excess_wavefronts"):
            if measured is None:
                cells += ['<td class="n first-of-device dim" data-v="">–</td>', number_cell(predicted[count], count)]
                continue
            same = measured[count] == predicted[count]
            mismatch |= not same
            cells += [number_cell(measured[count], f"measured_{count}", extra=" first-of-device"),
                      number_cell(predicted[count], count, extra=" match" if same else " mismatch")]
        verdict = "–" if measured is None else ("mismatch" if mismatch else "=")
        cells.append(f'<td class="{"mismatch" if mismatch else "match"}">{verdict}</td>')
        body.append(f'<tr data-{key}="{escape(str(name))}" data-rank="{rank}"'
                    f'{" data-mismatch" if mismatch else ""}>{"".join(cells)}</tr>')
    return (f'<h3>{escape(title)}</h3><table class="sortable compare"><thead><tr><th>{escape(label)}</th>{head}'
            f'<th>ncu vs predicted</th></tr></thead><tbody>{"".join(body)}</tbody></table>')


def _comparison(c: Comparison) -> str:
    parts = [notes_box([("", note) for note in c.notes], "Comparison notes"),
             _compare_table("per kernel (ncu Source page vs prediction)", "kernel",
                            [(c.measured_name or c.kernel, c.totals["measured"], c.totals["predicted"])], "total")]
    if c.by_pc:
        parts.append(_compare_table("per SASS instruction", "pc · SASS",
                                    [(pc_label(p, " "),
                                      p["measured"], p["predicted"]) for p in c.by_pc],
                                    "pc"))
    parts.append(_compare_table("per access kind", "kind", [(k["kind"], k["measured"], k["predicted"])
                                                            for k in c.by_kind], "kind"))
    if c.by_line:
        parts.append(_compare_table("per CUDA line", "line · source",
                                    [(f"{line['line']} {line['source'] or ''}".strip(), line["measured"],
                                      line["predicted"]) for line in c.by_line], "line"))
    return "\n".join(parts)


def ncu_page(compared: list[tuple[Comparison, KernelAnalysis]], rules, command: str,
             pictures: int | None = DEFAULT_PICTURES, failures: list[str] = (), notes: list[str] = ()) -> str:
    """The report of a ``compare-ncu`` run: per profiled launch, ncu's measured counts beside the prediction
    (mismatches marked), then the kernel's section as ``analyze`` draws it; ``notes``: about the whole run."""
    body = [notes_box([("warn", line) for line in failures], "Failures", " failures"),
            notes_box([("", note) for note in notes], "Notes")]
    shown = []
    for number, (c, analysis) in enumerate(compared):
        shown.append(analysis)
        body.append(KernelPage(analysis, [rules], number).section(pictures, None, before=_comparison(c)))
    if not compared:
        body.append("<p>No kernel of the report matched a predicted kernel.</p>")
    return document("traceconf: Nsight Compute vs prediction", command, kernel_options(shown), body)

