"""The report as one self-contained HTML page: what ``analyze -o report.html`` and ``compare-ncu`` write.

Everything is inline (CSS, the small script that sorts tables and filters kernels, the explain pictures as
SVG), so the file opens from disk with no network.  The numbers are plain table cells, readable without
JavaScript, taken from the per-instruction results (:func:`~traceconf.analyses.results.kernel_table`) and
the JSON document's totals: the same data ``--format json`` prints.  Per kernel, top to bottom: the launch
and every note (partial counts, unresolved accesses and why, CTA classes, the level and why), totals per
kind, the ranked instructions, suggestions, the lane×bank pictures of the top hotspots and the source
view.  All text is escaped.
"""

from __future__ import annotations

import re
from html import escape
from importlib import resources
from pathlib import Path

from traceconf.analyses.results import COUNTS, MODEL_MARK, kernel_table, partial_note
from traceconf.analyses.suggest import Suggestion, declaration
from traceconf.names import short_name
from traceconf.pipeline import KernelAnalysis
from traceconf.report.explain import explain_instruction
from traceconf.report.hotspots import launch_line, ranked, scale_note
from traceconf.report.html_source import group_by_line, heat, source_view
from traceconf.report.source import source_text
from traceconf.report.svg import render_svg
from traceconf.report.writers import kind_totals

#: Pictures per kernel and device when not asked otherwise: the top hotspots.
DEFAULT_PICTURES = 5
_REWRITE = re.compile(r"^pc ((?:0x[0-9a-f]+)(?:, 0x[0-9a-f]+)*)(?: \(\+(\d+) more\))?: (.+)$")


def inline_svg(svg: str) -> str:
    """A standalone SVG as an element of the page: HTML parses inline SVG without the namespace declaration
    (so the page holds no URL at all)."""
    return svg.replace(' xmlns="http://www.w3.org/2000/svg"', "", 1)


def _asset(name: str) -> str:
    return resources.files("traceconf.report").joinpath("assets", name).read_text(encoding="utf-8")


def number_cell(value: int, key: str = "", device: str = "", extra: str = "", title: str = "", row: str = "") -> str:
    attributes = (f' data-key="{key}"' if key else "") + (f' data-device="{escape(device)}"' if device else "")
    attributes += f' data-row="{escape(row)}"' if row else ""
    attributes += f' title="{escape(title)}"' if title else ""
    return f'<td class="n{extra}"{attributes} data-v="{value}">{value:,}</td>'


def document(title: str, command: str, kernels: list[tuple[str, str]], body: list[str]) -> str:
    """The page around ``body``: header, kernel filter (shown by the script), styles and script inline."""
    from traceconf import __version__

    options = "".join(f'<option value="{escape(name)}">{escape(label)}</option>' for name, label in kernels)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>", f"<style>\n{_asset('report.css')}</style>", "</head>", "<body>",
        '<header class="page">', f"<h1>{escape(title)}</h1>",
        f'<div class="meta">traceconf {escape(__version__)} · <code>{escape(command)}</code></div>',
        '<div class="filter" id="kernel-filter" hidden><label>kernel <select><option value="">all kernels</option>'
        f"{options}</select></label></div>", "</header>", "<main>", *body, "</main>",
        f"<script>\n{_asset('report.js')}</script>", "</body>", "</html>", ""])


def notes_box(items: list[tuple[str, str]], title: str = "Notes", extra: str = "") -> str:
    if not items:
        return ""
    lines = "".join(f'<li class="{style}">{escape(text)}</li>' if style else f"<li>{escape(text)}</li>"
                    for style, text in items)
    return f'<div class="notes{extra}"><h3>{escape(title)}</h3><ul>{lines}</ul></div>'


def _where(row: dict) -> str:
    """``pc 0x280`` / ``L81`` / ``#3`` (what ``explain --instruction`` takes), the PTX line beside a pc."""
    if row["pc"] is not None:
        return f"pc {row['pc']:#x}" + (f" (PTX L{row['ptx_line']})" if row["ptx_line"] is not None else "")
    if row["ptx_line"] is not None:
        return f"L{row['ptx_line']}"
    return f"#{row['instruction']}"


def _location(row: dict) -> str:
    return f"{Path(row['source_file']).name}:{row['source_line']}" if row["source"] else "–"


def rewrite_reasons(notes: list[str]) -> dict[int, str]:
    """pc → the one line saying what ptxas did to that access (the SASS level's notes name the pcs)."""
    reasons = {}
    for note in notes:
        found = _REWRITE.match(note)
        if found:
            more = f" (one of {len(found.group(1).split(', ')) + int(found.group(2))} copies)" if found.group(2) else ""
            for pc in found.group(1).split(", "):
                reasons[int(pc, 16)] = found.group(3) + more
    return reasons


class KernelPage:
    """One kernel's section: everything computed once from its per-instruction results."""

    def __init__(self, analysis: KernelAnalysis, rule_sets: list, number: int):
        # with devices of several architectures a kernel has one analysis per program: each counts its own
        counted = analysis.devices_among([rules.name for rules in rule_sets])
        self.rule_sets = [rules for rules in rule_sets if rules.name in counted]
        self.analysis, self.number = analysis, number
        self.devices = [rules.name for rules in self.rule_sets]
        self.tables = [kernel_table(analysis, device) for device in self.devices]
        self.rows = [table.to_pylist() for table in self.tables]
        self.totals = [sum(r["excess_wavefronts"] for r in rows) for rows in self.rows]
        self.tops = [max((r["excess_wavefronts"] for r in rows), default=0) for rows in self.rows]
        self.order = ranked(self.tables).tolist() if self.tables[0].num_rows else []
        self.rewrites = rewrite_reasons(analysis.notes)
        self.figures: dict[tuple[str, int], str] = {}      # (device, instruction) → figure id
        self.same_executions = all(t.column("executions").equals(self.tables[0].column("executions"))
                                   for t in self.tables)

    @property
    def anchor(self) -> str:
        return f"k{self.number}"

    # -- hotspot / instruction tables ---------------------------------------------------------------

    def _device_cells(self, index: int, device: int) -> list[str]:
        row, first = self.rows[device][index], self.rows[0][index]
        name = self.devices[device]
        row_key = f"{self.analysis.kernel}/{row['instruction']}"       # the JSON's (kernel, instruction)
        cells = [] if self.same_executions else [number_cell(row["executions"], "executions", name,
                                                             " first-of-device")]
        lead = ("" if cells else " first-of-device") + ("" if row["resolved"] else " unresolved")

        def differs(key: str) -> str:
            return " differs" if device and row[key] != first[key] else ""

        def why(key: str) -> str:
            return f"{self.devices[0]}: {first[key]:,}" if device and row[key] != first[key] else ""

        share = 100.0 * row["excess_wavefronts"] / self.totals[device] if self.totals[device] else 0.0
        excess_class = " excess" + (" some" if row["excess_wavefronts"] else "") + differs("excess_wavefronts")
        return cells + [
            number_cell(row["wavefronts"], "wavefronts", name, lead + differs("wavefronts"),
                 why("wavefronts") or (row["unresolved_reason"] or ""), row_key),
            number_cell(row["ideal_wavefronts"], "ideal_wavefronts", name, differs("ideal_wavefronts"), row=row_key),
            number_cell(row["excess_wavefronts"], "excess_wavefronts", name, excess_class, why("excess_wavefronts"),
                 row_key),
            f'<td class="heat" data-key="share" data-device="{escape(name)}" data-v="{share:.4f}">'
            f'{heat(row["excess_wavefronts"], self.totals[device], self.tops[device])}</td>',
            f'<td class="n{differs("max_ways")}" data-key="max_ways" data-device="{escape(name)}" '
            f'data-v="{row["max_ways"]}">{row["max_ways"]}-way</td>' if row["max_ways"] else
            f'<td class="n" data-key="max_ways" data-device="{escape(name)}" data-v="0">–</td>']

    def _head(self, leading: list[str]) -> str:
        per_device = (["execs"] if not self.same_executions else []) + ["wavefronts", "ideal", "excess", "share",
                                                                         "max"]
        groups = "".join(f'<th class="device" colspan="{len(per_device)}">{escape(d)}</th>' for d in self.devices)
        names = "".join(f'<th class="n">{n}</th>' if n in ("#", "execs") else f"<th>{n}</th>" for n in leading)
        for _ in self.devices:
            names += "".join(f'<th class="n{" first-of-device" if i == 0 else ""}">{n}</th>'
                             for i, n in enumerate(per_device))
        return (f'<thead><tr><th colspan="{len(leading)}"></th>{groups}</tr><tr>{names}</tr></thead>')

    def _instruction_cells(self, index: int) -> list[str]:
        row = self.rows[0][index]
        text = " ".join((row["text"] or "").split())
        reason = self.rewrites.get(row["pc"]) if row["pc"] is not None else None
        links = " ".join(f'<a href="#{self.figures[(d, row["instruction"])]}">picture ({escape(d)})</a>'
                         for d in self.devices if (d, row["instruction"]) in self.figures)
        # not counted, or only partly (the counted warps' executions are in the numbers): why, per device
        missing, modelled = {}, {}
        for device, rows in zip(self.devices, self.rows):
            if not rows[index]["resolved"]:
                missing.setdefault(rows[index]["unresolved_reason"] or "addresses unknown", []).append(device)
            if rows[index]["model_note"]:           # Nsight may count it otherwise (RESULT_ROWS model_note)
                modelled.setdefault(rows[index]["model_note"], []).append(device)
        extra = (f'<div class="rewrite">{escape(reason)}</div>' if reason else "") + "".join(
            f'<div class="unresolved">unresolved ({escape(", ".join(devices))}): {escape(why)}</div>'
            for why, devices in missing.items()) + "".join(
            f'<div class="unresolved">{MODEL_MARK} ({escape(", ".join(devices))}): {escape(why)}</div>'
            for why, devices in modelled.items()) + (f"<div>{links}</div>" if links else "")
        row_key = f"{self.analysis.kernel}/{row['instruction']}"
        cells = [f'<td class="text" data-key="instruction" data-row="{escape(row_key)}"><span class="dim">'
                 f'{escape(_where(row))}</span> {escape(text)}{extra}</td>',
                 f'<td data-key="kind">{escape(row["kind"])}.{row["width_bits"]}</td>']
        if self.same_executions:
            cells.append(number_cell(row["executions"], "executions"))
        return cells

    def hotspot_table(self) -> str:
        leading = ["#", "source", "instruction", "kind"] + (["execs"] if self.same_executions else [])
        body = []
        for rank, index in enumerate(self.order, 1):
            row = self.rows[0][index]
            cells = [f'<td class="n" data-v="{rank}">{rank}</td>',
                     f'<td data-key="source">{escape(_location(row))}</td>', *self._instruction_cells(index)]
            for device in range(len(self.devices)):
                cells += self._device_cells(index, device)
            body.append(f'<tr data-instruction="{row["instruction"]}" data-rank="{rank}" '
                        f'data-kernel-of="{escape(self.analysis.kernel)}">{"".join(cells)}</tr>')
        return (f'<div class="scroll"><table class="sortable hotspots" data-kernel-table="{self.anchor}">'
                f'{self._head(leading)}<tbody>{"".join(body)}</tbody></table></div>')

    def line_table(self, rows_by_device: list[list[dict]]) -> str:
        """The instructions a source line expands to (same columns as the hotspot table, no source)."""
        ids = [r["instruction"] for r in rows_by_device[0]]
        at = {r["instruction"]: i for i, r in enumerate(self.rows[0])}
        leading = ["instruction", "kind"] + (["execs"] if self.same_executions else [])
        body = []
        for ident in ids:
            index = at[ident]
            cells = self._instruction_cells(index)
            for device in range(len(self.devices)):
                cells += self._device_cells(index, device)
            body.append(f'<tr data-instruction="{ident}">{"".join(cells)}</tr>')
        return (f'<div class="scroll"><table class="instructions">{self._head(leading)}<tbody>{"".join(body)}'
                f'</tbody></table></div>')

    # -- the rest of the section ----------------------------------------------------------------------

    def notes(self, missing_sources: list[str]) -> str:
        a = self.analysis
        items = [("warn", scale_note(a.launch))] if "partial" in a.launch else []
        partial = partial_note(a)
        if partial:
            items.append(("warn", partial))
        items += [("", note) for note in a.notes]
        items += [("warn", f"[{u['instruction']}] {' '.join(str(u.get('ptx') or '').split())}: "
                           f"{u.get('reason') or 'addresses unknown'}") for u in a.unresolved]
        items += [("", f"source not found: {name}") for name in missing_sources]
        return notes_box(items)

    def facts(self) -> str:
        a = self.analysis
        level = a.launch.get("level") or ("ptx" if a.input_format == "ptx" else a.input_format)
        facts = [("input", a.input_path), ("launch", launch_line(a.launch, a.kernel)),
                 ("scale", scale_note(a.launch)), ("level", level), ("devices", ", ".join(self.devices))]
        return '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{escape(str(v))}</dd>" for k, v in facts) + "</dl>"

    def totals_table(self) -> str:
        sums = [kind_totals(table) for table in self.tables]
        kinds = [kind for kind in sums[0] if any(s[kind]["executions"] or s[kind]["wavefronts"] for s in sums)]
        head = "".join(f'<th class="device" colspan="{len(COUNTS)}">{escape(d)}</th>' for d in self.devices)
        names = "".join(f'<th class="n{" first-of-device" if i == 0 else ""}">{n.replace("_wavefronts", "")}</th>'
                        for _ in self.devices for i, n in enumerate(COUNTS))
        body = []
        for kind in kinds + ["all"]:
            cells = [f"<td>{kind}</td>"]
            for device, per_kind in zip(self.devices, sums):
                if device in self.analysis.device_gaps:
                    cells.append(f'<td class="first-of-device" colspan="{len(COUNTS)}">not counted</td>')
                    continue
                for i, name in enumerate(COUNTS):
                    value = sum(k[name] for k in per_kind.values()) if kind == "all" else per_kind[kind][name]
                    cells.append(number_cell(value, name, device, " first-of-device" if i == 0 else ""))
            body.append(f'<tr data-kind="{kind}">{"".join(cells)}</tr>')
        return (f'<div class="scroll"><table class="totals"><thead><tr><th></th>{head}</tr><tr><th>kind</th>{names}'
                f'</tr></thead><tbody>{"".join(body)}</tbody></table></div>')

    def pictures(self, count: int | None) -> str:
        """The explain picture of the top ``count`` hotspots per device (None: every executed instruction)."""
        a = self.analysis
        out = []
        for device, rules in enumerate(self.rule_sets):
            accesses = a.accesses.get(rules.warp_size)
            if accesses is None or not len(accesses):
                continue
            rows = self.rows[device]
            chosen = [i for i in ranked([self.tables[device]]).tolist()
                      if rows[i]["resolved"] and rows[i]["executions"]
                      and (count is None or rows[i]["excess_wavefronts"])]
            for index in chosen[:count]:
                row = rows[index]
                try:
                    pic = explain_instruction(accesses, row["instruction"], rules, row["text"] or "",
                                              source=_location(row) if row["source"] else None,
                                              code=source_text(row["source_file"], row["source_line"], a.input_path),
                                              aligned=a.aligned_sources.get(row["instruction"]))
                except LookupError:          # not among the kept executions
                    continue
                figure = f"pic-{self.anchor}-d{device}-{row['instruction']}"
                self.figures[(rules.name, row["instruction"])] = figure
                kept = "" if a.complete else " of the executions kept"
                out.append(f'<figure class="picture" id="{figure}" data-instruction="{row["instruction"]}" '
                           f'data-kernel-of="{escape(a.kernel)}" '
                           f'data-device="{escape(rules.name)}"><figcaption><b>{escape(rules.name)}</b> '
                           f'{escape(_where(row))} {escape(" ".join((row["text"] or "").split()))} '
                           f'({escape(_location(row))}): the worst execution{kept}, lane by lane</figcaption>'
                           f"{inline_svg(render_svg(pic))}</figure>")
        if not out:
            if not any(a.accesses.values()):
                return ('<p class="dim">No per-lane addresses were kept for this kernel (streamed traces and '
                        'runs on several workers keep none): <code>traceconf explain</code> draws any '
                        'instruction.</p>')
            return '<p class="dim">No instruction with excess wavefronts to draw.</p>'
        return "\n".join(out)

    def suggestions(self, found: list[tuple[int, Suggestion | None]]) -> str:
        a = self.analysis
        info = {r["instruction"]: r for r in self.rows[0]}
        out, done = [], set()
        for instruction, suggestion in found:
            row = info.get(instruction)
            name = f"{_where(row)} {' '.join((row['text'] or '').split())}" if row else f"#{instruction}"
            if suggestion is None:
                out.append(f'<div class="suggestion none">{escape(name)}: no per-lane addresses or row pattern '
                           f"to work with</div>")
                continue
            key = (suggestion.variable.name, suggestion.best.label if suggestion.best else "")
            if key in done:
                out.append(f'<div class="suggestion">{escape(name)}: {escape(suggestion.headline())} '
                           f"(same change as above)</div>")
                continue
            done.add(key)
            parts = [f"<b>{escape(name)}</b> ({escape(_location(row) if row else '–')}): "
                     f"{escape(suggestion.headline())}"]
            # without a shared layout (SASS level, traces) the variable has no name: the tile the line indexes
            known = suggestion.variable.name if suggestion.variable.bytes is not None else None
            edit = declaration(row["source_file"], row["source_line"], a.input_path, known) if row else None
            if edit is not None:
                parts.append(f"<div>declaration to edit: <code>{escape(Path(row['source_file']).name)}:{edit[0]}"
                             f"</code> <code>{escape(edit[1])}</code></div>")
            if suggestion.best is not None:
                worse = suggestion.regressions()
                if worse:
                    parts.append(f'<div class="excess some">but it makes {len(worse)} other instruction(s) slower'
                                 "</div>")
                parts.append(self._before_after(suggestion, info))
            style = "" if suggestion.best else " none"
            out.append(f'<div class="suggestion{style}" data-instruction="{instruction}">{"".join(parts)}</div>')
        return "\n".join(out) if out else "<p>No bank conflicts: nothing to suggest.</p>"

    @staticmethod
    def _before_after(suggestion: Suggestion, info: dict) -> str:
        body = []
        for ident in sorted(suggestion.baseline.per_instruction):
            before, after = suggestion.baseline.per_instruction[ident], suggestion.best.per_instruction[ident]
            row = info.get(ident)
            name = f"{_where(row)} {' '.join((row['text'] or '').split())}" if row else f"#{ident}"
            style = " excess some" if after[0] > before[0] else ""
            body.append(f'<tr data-instruction="{ident}"><td class="text">{escape(name)}</td>{number_cell(before[0])}'
                        f'{number_cell(after[0], extra=style)}<td class="n">{before[1]}-way</td>'
                        f'<td class="n">{after[1]}-way</td></tr>')
        body.append(f"<tr><th>all accesses to {escape(suggestion.variable.name)}</th>"
                    f"{number_cell(suggestion.baseline.wavefronts)}{number_cell(suggestion.best.wavefronts)}"
                    "<td></td><td></td></tr>")
        return ('<table class="before-after"><thead><tr><th>instruction</th><th class="n">wavefronts now</th>'
                '<th class="n">after</th><th class="n">ways now</th><th class="n">after</th></tr></thead>'
                f'<tbody>{"".join(body)}</tbody></table>')

    def source(self) -> tuple[str, list[str]]:
        """(the source view, files the line info names that were not found)."""
        files, loose, missing = group_by_line(self.rows, self.analysis.input_path)
        parts = [source_view(self.analysis.kernel, name, lines, by_line, self.devices, self.totals, self.line_table)
                 for name, (lines, by_line) in files.items()]
        if loose:
            title = ("Instructions without readable source" if files
                     else "No source line info or no readable source: the instruction listing")
            rows = [[rows[i] for i in loose] for rows in self.rows]
            parts.append(f"<h4>{title}</h4>{self.line_table(rows)}")
        return "\n".join(parts), missing

    def section(self, pictures: int | None, found: tuple[str, list] | None, before: str = "") -> str:
        a = self.analysis
        readable = short_name(a.kernel, width=120)
        mangled = f'<span class="mangled">{escape(a.kernel)}</span>' if readable != a.kernel else ""
        figures = self.pictures(pictures) if pictures != 0 else ""    # first: the tables link to them
        source, missing = self.source()
        # where the time goes (source, by line), why (the pictures), what to change (suggestions), then every
        # instruction ranked as the terminal ranks them
        parts = [f'<section class="kernel" id="{self.anchor}" data-kernel="{escape(a.kernel)}">',
                 f"<h2>{escape(readable)}{mangled}</h2>", self.facts(), self.notes(missing), before,
                 "<h3>Totals</h3>", self.totals_table(),
                 "<h3>Source <span class=\"dim\">(click a line for its instructions)</span></h3>", source]
        if figures:
            parts += ["<h3>Lane × bank pictures</h3>", figures]
        if found is not None:
            parts += [f"<h3>Suggestions ({escape(found[0])})</h3>", self.suggestions(found[1])]
        parts += ["<h3>Instructions, worst first</h3>", self.hotspot_table(), "</section>"]
        return "\n".join(parts)


def _summary(pages: list[KernelPage], devices: list[str]) -> str:
    head = "".join(f'<th class="n first-of-device">{escape(d)} wavefronts</th><th class="n">excess</th>'
                   for d in devices)
    body = []
    for rank, page in enumerate(pages, 1):
        cells = [f'<td><a href="#{page.anchor}">{escape(short_name(page.analysis.kernel))}</a></td>',
                 f"<td>{escape(page.analysis.input_path)}</td>"]
        for device in devices:
            if device not in page.devices:        # counted by this kernel's analysis of another architecture
                cells += ['<td class="first-of-device dim">–</td>', '<td class="dim">–</td>']
                continue
            at = page.devices.index(device)
            cells += [number_cell(sum(r["wavefronts"] for r in page.rows[at]), "wavefronts", device,
                                  " first-of-device"),
                      number_cell(page.totals[at], "excess_wavefronts", device,
                                  " excess some" if page.totals[at] else "")]
        body.append(f'<tr data-kernel="{escape(page.analysis.kernel)}" data-rank="{rank}">{"".join(cells)}</tr>')
    return (f'<h2>Kernels</h2><table class="sortable summary"><thead><tr><th>kernel</th><th>input</th>{head}</tr>'
            f'</thead><tbody>{"".join(body)}</tbody></table>')


def analysis_page(analyses: list[KernelAnalysis], rule_sets: list, command: str,
                  pictures: int | None = DEFAULT_PICTURES, suggestions: list[tuple[str, list]] | None = None,
                  failures: list[str] = ()) -> str:
    """The report of an ``analyze`` run: ``pictures`` per kernel and device (None: every executed
    instruction), ``suggestions`` per analysis (``--suggest``: the device and its (instruction, suggestion)
    list), ``failures`` one line each."""
    pages = [KernelPage(analysis, rule_sets, number) for number, analysis in enumerate(analyses)]
    body = [notes_box([("warn", line) for line in failures], "Failures", " failures")]
    body.append(_summary(pages, [r.name for r in rule_sets]) if pages else "<p>No kernel was analysed.</p>")
    body += [page.section(pictures, None if suggestions is None else suggestions[page.number]) for page in pages]
    return document("traceconf report", command, kernel_options(analyses), body)


def kernel_options(analyses: list[KernelAnalysis]) -> list[tuple[str, str]]:
    return [(a.kernel, short_name(a.kernel)) for a in analyses]
