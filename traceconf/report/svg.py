"""The explain picture as a standalone SVG: banks as columns, one row per wavefront.

Each cell is one (bank, word) served in that wavefront, labelled with the
lane(s) that asked for it and the word index; rows are tinted by phase, and
cells of banks that serialise inside their phase are outlined in red — the
drawing the bank-conflict tutorials make by hand, for the real addresses.
"""

from __future__ import annotations

from html import escape

from traceconf.accesses import INACTIVE
from traceconf.report.explain import PHASE_FILLS, Picture, lane_ranges

CELL_W, CELL_H = 34, 30
LEFT, TOP = 108, 92
CONFLICT = "#d62728"


def _cells(pic: Picture) -> dict[tuple[int, int, int], tuple[list[int], int]]:
    """(phase, pass, bank) → (lanes, word)."""
    cells: dict[tuple[int, int, int], tuple[list[int], int]] = {}
    for lane, bank, word, phase, wave in zip(pic.lane.tolist(), pic.bank.tolist(), pic.word.tolist(),
                                             pic.phase.tolist(), pic.wave.tolist()):
        lanes, _ = cells.setdefault((phase, wave, bank), ([], word))
        if lane not in lanes:
            lanes.append(lane)
    return cells


def render_svg(pic: Picture) -> str:
    e = pic.execution
    rows = pic.rows()
    width = LEFT + pic.banks * CELL_W + 20
    height = TOP + max(len(rows), 1) * CELL_H + 70
    excess = pic.wavefronts - pic.ideal_wavefronts
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
           f'<title>{escape(e.kernel)} [{e.instruction}] {escape(e.text)}</title>',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(e.kernel)} [{e.instruction}] '
           f'{escape(e.text)}</text>',
           f'<text x="10" y="38">device {escape(e.device)} · CTA {e.cta} · warp {e.warp} · execution {e.ordinal}'
           f' · {e.kind} {e.bytes * 8}-bit · {int((e.address != INACTIVE).sum())} active lanes</text>',
           f'<text x="10" y="56" fill="{CONFLICT if excess else "#2ca02c"}" font-weight="bold">'
           f'{pic.wavefronts} wavefronts, ideal {pic.ideal_wavefronts}, excess {excess}, '
           f'worst {pic.max_ways}-way</text>']
    for bank in range(pic.banks):
        x = LEFT + bank * CELL_W
        out.append(f'<text x="{x + CELL_W / 2}" y="{TOP - 8}" text-anchor="middle" font-weight="bold">{bank}</text>')
    out.append(f'<text x="{LEFT - 6}" y="{TOP - 8}" text-anchor="end">bank →</text>')
    cells = _cells(pic)
    conflicting = {(int(p), int(b)) for p, b, c in zip(pic.phase, pic.bank, pic.conflicting()) if c}
    for row, (p, k) in enumerate(rows):
        y = TOP + row * CELL_H
        fill = PHASE_FILLS[p % len(PHASE_FILLS)]
        out.append(f'<rect x="4" y="{y}" width="{LEFT - 8}" height="{CELL_H}" fill="{fill}"/>')
        out.append(f'<text x="8" y="{y + 19}">phase {p} wf {k}</text>')
        for bank in range(pic.banks):
            x = LEFT + bank * CELL_W
            cell = cells.get((p, k, bank))
            if cell is None:
                out.append(f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" fill="none" '
                           f'stroke="#dddddd"/>')
                continue
            lanes, word = cell
            hot = (p, bank) in conflicting
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
               f'w = {pic.bank_bytes}-byte word index; red outline: the bank serialises inside its phase</text>')
    phases = "; ".join(f"phase {p}: lanes {lane_ranges(lanes)}" for p, lanes in enumerate(pic.phases))
    out.append(f'<text x="10" y="{legend_y + 18}">{escape(phases)}</text>')
    out.append("</svg>")
    return "\n".join(out)

