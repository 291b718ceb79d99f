"""The source view of the HTML report: each kernel's CUDA (or Python) lines with their counts.

Every line that holds shared-memory instructions is a ``<details>`` element: its summary carries the line's
wavefronts and excess per device and its share of the kernel's excess (the heat column); opened, it lists
the line's SASS/PTX instructions with their counts and, where ptxas rewrote them, the one-line reason.
Lines around them are shown for context; instructions whose file is not readable, or that have no line
info, fall back to an instruction listing.  The counts are the per-instruction results, summed per line.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from traceconf.sources import resolve_source, source_candidates, source_lines

#: Lines shown around each line with instructions, and the widest gap shown rather than folded.
CONTEXT, GAP = 2, 3


def heat(excess: int, total: int, top: int) -> str:
    """The heat cell's content: the share of the kernel's excess, after a bar scaled to the largest ``top``."""
    if not total:
        return '<span class="dim">–</span>'
    return (f'<span class="bar" style="width:{60.0 * excess / top if top else 0:.1f}px"></span>'
            f'{100.0 * excess / total:.1f}%')


def _line_sums(rows_by_device: list[list[dict]]) -> list[tuple[int, int]]:
    return [(sum(r["wavefronts"] for r in rows), sum(r["excess_wavefronts"] for r in rows))
            for rows in rows_by_device]


def _summary_cells(sums: list[tuple[int, int]], totals: list[int], tops: list[int], devices: list[str],
                   where: str) -> str:
    cells = []
    for (wavefronts, excess), total, top, device in zip(sums, totals, tops, devices):
        mark = f' data-device="{escape(device)}" {where}'
        cells.append(f'<span class="n" data-key="line_wavefronts"{mark} data-v="{wavefronts}">{wavefronts:,}</span>'
                     f'<span class="n" data-key="line_excess"{mark} data-v="{excess}">{excess:,}</span>'
                     f'<span class="share" data-key="share"{mark} '
                     f'data-v="{100.0 * excess / total if total else 0:.4f}">{heat(excess, total, top)}</span>')
    return "".join(cells)


def _blank_cells(devices: int) -> str:
    return '<span class="n"></span><span class="n"></span><span class="share"></span>' * devices


def _header(devices: list[str]) -> str:
    names = "".join(f'<span class="n">{escape(d)} wavefronts</span><span class="n">excess</span>'
                    f'<span class="share">share</span>' for d in devices)
    return f'<div class="srcrow head"><span class="ln">line</span>{names}<code>source</code></div>'


def source_view(kernel: str, file: str, lines: tuple[str, ...], by_line: dict[int, list[list[dict]]],
                devices: list[str], totals: list[int], instruction_table) -> str:
    """One file's view: ``by_line`` maps a line number to its instructions' rows (one list per device);
    ``instruction_table(rows_by_device)`` renders the rows a line expands to."""
    shown: set[int] = set()
    for number in by_line:
        shown.update(range(max(1, number - CONTEXT), min(len(lines), number + CONTEXT) + 1))
    sums = {number: _line_sums(rows) for number, rows in by_line.items()}
    tops = [max(line[device][1] for line in sums.values()) for device in range(len(devices))]
    out = [f'<div class="source" data-file="{escape(file)}"><div class="file">{escape(file)}</div>',
           _header(devices)]
    previous = 0
    for number in sorted(shown | set(by_line)):
        if number - previous > 1:
            if previous and number - previous - 1 <= GAP:
                shown_gap = range(previous + 1, number)
                out += [_plain(n, lines, len(devices)) for n in shown_gap]
            else:
                out.append(f'<div class="srcrow gap"><span class="ln"></span><code>⋯ lines {previous + 1}–'
                           f'{number - 1}</code></div>')
        previous = number
        if number not in by_line:
            out.append(_plain(number, lines, len(devices)))
            continue
        rows = by_line[number]
        text = lines[number - 1] if number <= len(lines) else ""
        where = f'data-kernel-of="{escape(kernel)}" data-line="{number}"'
        out.append(f'<details class="line" {where}><summary class="srcrow">'
                   f'<span class="ln">{number}</span>{_summary_cells(sums[number], totals, tops, devices, where)}'
                   f'<code>{escape(text)}</code></summary><div class="inner">{instruction_table(rows)}</div></details>')
    out.append("</div>")
    return "\n".join(out)


def _plain(number: int, lines: tuple[str, ...], devices: int) -> str:
    text = lines[number - 1] if number <= len(lines) else ""
    return (f'<div class="srcrow"><span class="ln">{number}</span>{_blank_cells(devices)}'
            f'<code>{escape(text)}</code></div>')


def _shown(path: Path) -> str:
    """The file as read: relative to the working directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def group_by_line(rows_by_device: list[list[dict]], input_path: str
                  ) -> tuple[dict[str, tuple[tuple[str, ...], dict[int, list[list[dict]]]]], list[int], list[str]]:
    """(readable file → (its lines, line → rows per device), instruction indices without readable source,
    files named by the line info that were not found, each with where it was looked for)."""
    files: dict[str, tuple[tuple[str, ...], dict[int, list[list[dict]]]]] = {}
    loose: list[int] = []
    missing: dict[str, str] = {}
    for index, row in enumerate(rows_by_device[0]):
        name, number = row["source_file"], row["source_line"]
        found = resolve_source(name, input_path) if name and number else None
        if found is None:
            if name and name not in missing:
                missing[name] = ", ".join(str(c) for c in source_candidates(name, input_path))
            loose.append(index)
            continue
        _, by_line = files.setdefault(_shown(found), (source_lines(found), {}))
        per_device = by_line.setdefault(number, [[] for _ in rows_by_device])
        for device, rows in enumerate(rows_by_device):
            per_device[device].append(rows[index])
    return files, loose, [f"{Path(name).name} (looked for: {where})" for name, where in missing.items()]
