"""The explain picture as a standalone SVG: banks as columns, one row per wavefront.

Each row is one wavefront the engine counted, each cell a bank word it served
there, labelled with the lane(s) that asked for it and the word index; rows are
tinted by phase, and cells of banks served in several wavefronts of their phase
are outlined in red — the drawing the bank-conflict tutorials make by hand, for
the real addresses.
"""

from __future__ import annotations

from html import escape

from traceconf.accesses import INACTIVE
from traceconf.report.explain import PHASE_FILLS, Picture, lane_ranges, legend

CELL_W, CELL_H = 34, 30
LEFT, TOP = 108, 92
CONFLICT = "#d62728"


def _cells(pic: Picture) -> dict[tuple[int, int], tuple[list[int], list[int]]]:
    """(wavefront, bank) → (lanes, words)."""
    cells: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    for lane, bank, word, wave in zip(pic.lane.tolist(), pic.bank.tolist(), pic.word.tolist(), pic.wave.tolist()):
        lanes, words = cells.setdefault((wave, bank), ([], []))
        if lane not in lanes:
            lanes.append(lane)
        if word not in words:
            words.append(word)
    return cells


def render_svg(pic: Picture) -> str:
    e = pic.execution
    rows = pic.rows
    width = LEFT + pic.banks * CELL_W + 20
    notes = [line for line in legend(pic).plain.splitlines() if line]
    height = TOP + max(len(rows), 1) * CELL_H + 70 + 18 * len(notes)
    excess = pic.wavefronts - pic.ideal_wavefronts
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
           f'<title>{escape(e.title())}</title>',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(e.title())}</text>',
           f'<text x="10" y="38">device {escape(e.device)} · CTA {e.cta} · warp {e.warp} · execution {e.ordinal}'
           f' · {e.kind} {e.bytes * 8}-bit · {int((e.address != INACTIVE).sum())} active lanes</text>',
           f'<text x="10" y="56" fill="{CONFLICT if excess else "#2ca02c"}" font-weight="bold">'
           f'{pic.wavefronts} wavefronts, ideal {pic.ideal_wavefronts}, excess {excess}, '
           f'worst {pic.max_ways}-way</text>']
    if e.code:
        out.append(f'<text x="10" y="72" fill="#555555">{escape(e.code)}</text>')
    for bank in range(pic.banks):
        x = LEFT + bank * CELL_W
        out.append(f'<text x="{x + CELL_W / 2}" y="{TOP - 8}" text-anchor="middle" font-weight="bold">{bank}</text>')
    out.append(f'<text x="{LEFT - 6}" y="{TOP - 8}" text-anchor="end">bank →</text>')
    cells = _cells(pic)
    conflicting = {(int(w), int(b)) for w, b, c in zip(pic.wave, pic.bank, pic.conflicting()) if c}
    for k, row in enumerate(rows):
        y = TOP + k * CELL_H
        fill = PHASE_FILLS[row.phase % len(PHASE_FILLS)]
        out.append(f'<rect x="4" y="{y}" width="{LEFT - 8}" height="{CELL_H}" fill="{fill}"/>')
        out.append(f'<text x="8" y="{y + 19}">{escape(pic.label(k))}</text>')
        for bank in range(pic.banks):
            x = LEFT + bank * CELL_W
            cell = cells.get((k, bank))
            if cell is None:
                out.append(f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" fill="none" '
                           f'stroke="#dddddd"/>')
                continue
            lanes, words = cell
            word = "/".join(map(str, words))
            hot = (k, bank) in conflicting
            stroke = f'stroke="{CONFLICT}" stroke-width="2"' if hot else 'stroke="#888888"'
            label = str(lanes[0]) if len(lanes) == 1 else f"{min(lanes)}+{len(lanes) - 1}"
            out.append(f'<g><title>lanes {lane_ranges(lanes)} · word {word} · bank {bank}'
                       f'{" · conflict" if hot else ""}</title>'
                       f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" fill="{fill}" {stroke}/>'
                       f'<text x="{x + CELL_W / 2}" y="{y + 13}" text-anchor="middle" font-weight="bold">'
                       f'{label}</text>'
                       f'<text x="{x + CELL_W / 2}" y="{y + 25}" text-anchor="middle" font-size="8" fill="#555555">'
                       f'w{word}</text></g>')
    legend_y = TOP + max(len(rows), 1) * CELL_H + 24
    out.append(f'<text x="10" y="{legend_y}">cell: lane (n+k = n and k more lanes on the same word), '
               f'w = {pic.bank_bytes}-byte word index; red outline: the bank serves its phase in several '
               f'wavefronts</text>')
    phases = "; ".join(f"phase {p}: lanes {lane_ranges(lanes)}" for p, lanes in enumerate(pic.phases))
    out.append(f'<text x="10" y="{legend_y + 18}">{escape(phases)}</text>')
    for i, note in enumerate(notes):
        out.append(f'<text x="10" y="{legend_y + 36 + 18 * i}">{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out)

