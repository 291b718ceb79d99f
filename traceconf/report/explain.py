"""One warp execution, lane by lane: which bank and word each lane hits, who collides, and why.

The picture is the one the classic bank-conflict tutorials draw by hand:
banks as columns, one row per wavefront (shared-memory pass), lane numbers in
the cells.  Every row is one wavefront the engine counted for the execution
and every cell a bank word it served there, as :func:`traceconf.engine.lane_wavefronts`
assigned them: lanes split into the device's lane groups ("phases": half-warps
on sm_1x, quarter-warps for 128-bit accesses on sm_90, one group per 8×8
matrix for ldmatrix ...; merged by load pairing), wide accesses split into
requests, sm_1x's one broadcast word per pass, the rule's extra passes.  This
module only draws; it decides nothing about banks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.analyses.results import MODEL_MARK
from traceconf.emulate.allocation import with_assumption
from traceconf.engine import LaneWavefronts, analyze, instructions_from_sources, lane_wavefronts
from traceconf.names import short_name
from traceconf.schemas import KINDS

#: Phase colours (terminal styles and SVG fills), cycled.
PHASE_STYLES = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
PHASE_FILLS = ("#cfe8ff", "#f6d0f6", "#d3f5d3", "#fff2b3", "#dcdcff", "#ffd9c2", "#c9f2ef", "#ecd9ff")


@dataclass
class Execution:
    """The one warp execution being explained, with where it came from."""

    kernel: str
    instruction: int
    text: str
    device: str
    cta: int
    warp: int
    ordinal: int             # n-th execution of this instruction by this warp (0-based)
    execution: int           # execution id
    kind: str
    bytes: int
    matrices: int
    address: np.ndarray      # (warp_size,) byte addresses, INACTIVE for inactive lanes
    source: str | None = None   # the CUDA (or Python) ``file:line`` of the instruction, from its line info
    code: str | None = None     # that line's text, when the file is readable
    model_note: str = ""        # why Nsight may count this execution otherwise (the rule's model_note)

    def title(self) -> str:
        """``transpose_unpadded [30] ld.shared.f32 … at transpose.cu:17``: readable, the mangled name left out."""
        where = f" at {self.source}" if self.source else ""
        return f"{short_name(self.kernel)} [{self.instruction}] {' '.join(self.text.split())}{where}"


class Wavefront(NamedTuple):
    """One drawn row: the engine's wavefront of one phase (and request)."""

    phase: int
    request: int
    pass_: int               # 0-based pass inside its phase and request
    extra: bool              # added by the rule (extra_wavefronts); serves no lane


@dataclass
class Picture:
    """Per-cell view of one execution under one rule set, as the engine assigned it."""

    execution: Execution
    banks: int
    bank_bytes: int
    requests: int                     # separate requests per lane access (split accesses: > 1)
    phases: list[tuple[int, ...]]     # active lanes of each lane group that has any, in group order
    lane: np.ndarray                  # per cell (one lane's bank word in one request):
    bank: np.ndarray
    word: np.ndarray
    phase: np.ndarray
    request: np.ndarray
    wave: np.ndarray                  # the engine's wavefront index inside the execution
    rows: list[Wavefront]             # row k draws wavefront k
    wavefronts: int
    ideal_wavefronts: int
    max_ways: int

    @property
    def phase_wavefronts(self) -> list[int]:
        """Wavefronts of each phase (all requests)."""
        return [sum(1 for row in self.rows if row.phase == p) for p in range(len(self.phases))]

    def label(self, k: int) -> str:
        """``p1 wf3`` (phase 1, its 4th pass); ``r1 `` in front for the second request of a split access."""
        row = self.rows[k]
        request = f"r{row.request} " if self.requests > 1 else ""
        return f"{request}p{row.phase} wf{row.pass_}{' extra' if row.extra else ''}"

    def conflicting(self) -> np.ndarray:
        """Per cell: is its bank served in more than one wavefront of its phase and request?"""
        key = (self.request * len(self.phases) + self.phase) * self.banks + self.bank
        pairs = np.unique(np.stack([key, self.wave]), axis=1)
        keys, passes = np.unique(pairs[0], return_counts=True)
        return passes[np.searchsorted(keys, key)] > 1


def picture(execution: Execution, rules, served: LaneWavefronts, row: int = 0) -> Picture:
    """The cells of ``execution``: row ``row`` of ``served``, the engine's lane assignment."""
    mine = served.row == row
    group, lane = served.group[mine], served.lane[mine]
    groups = np.unique(group)
    phase_of = {int(g): p for p, g in enumerate(groups.tolist())}
    phases = [tuple(sorted(set(lane[group == g].tolist()))) for g in groups]
    waves = served.wavefront_row == row
    rows = [Wavefront(phase_of[int(g)], int(r), int(k), bool(x)) for g, r, k, x in zip(
        served.wavefront_group[waves], served.wavefront_request[waves], served.wavefront_pass[waves],
        served.wavefront_extra[waves])]
    requests = int(served.wavefront_request[waves].max()) + 1 if waves.any() else 1
    return Picture(execution, rules.banks, rules.bank_bytes, requests, phases, lane, served.bank[mine],
                   served.word[mine], np.array([phase_of[int(g)] for g in group.tolist()], dtype=np.int64),
                   served.request[mine], served.wavefront[mine], rows, int(served.wavefronts[row]),
                   int(served.ideal_wavefronts[row]), int(served.max_ways[row]))


# ---------------------------------------------------------------------------
# Choosing the execution
# ---------------------------------------------------------------------------

def executions_of(accesses: WarpAccesses, instruction: int) -> np.ndarray:
    """Rows of ``accesses`` that executed ``instruction``, in execution order."""
    rows = np.nonzero(accesses.instruction == instruction)[0]
    return rows[np.argsort(accesses.execution[rows], kind="stable")]


def choose_row(accesses: WarpAccesses, rows: np.ndarray, wavefronts: np.ndarray, warp: int | None,
               ordinal: int | None) -> tuple[int, int]:
    """(row, ordinal): the ``ordinal``-th execution by ``warp`` (first CTA), or else the worst one.

    ``wavefronts`` holds the engine's count for each of ``rows``; without --warp
    and --execution the execution with the most wavefronts is explained, because
    that is the one worth looking at.
    """
    if warp is None and ordinal is None:
        pick = rows[int(np.argmax(wavefronts))]
    else:
        cta = accesses.cta[rows[0]]
        mine = rows[(accesses.cta[rows] == cta) & (accesses.warp[rows] == (0 if warp is None else warp))]
        if not len(mine):
            warps = sorted(set(accesses.warp[rows[accesses.cta[rows] == cta]].tolist()))
            raise LookupError(f"warp {warp} never executes this instruction (warps that do: "
                              f"{', '.join(map(str, warps))})")
        index = 0 if ordinal is None else ordinal
        if not 0 <= index < len(mine):
            raise LookupError(f"warp {0 if warp is None else warp} executes this instruction {len(mine)} time(s); "
                              f"--execution must be 0..{len(mine) - 1}")
        pick = mine[index]
    same = rows[(accesses.cta[rows] == accesses.cta[pick]) & (accesses.warp[rows] == accesses.warp[pick])]
    return int(pick), int(np.nonzero(same == pick)[0][0])


def execution_at(accesses: WarpAccesses, row: int, ordinal: int, text: str, device: str,
                 source: str | None = None, code: str | None = None) -> Execution:
    return Execution(kernel=accesses.kernel, instruction=int(accesses.instruction[row]), text=text, device=device,
                     cta=int(accesses.cta[row]), warp=int(accesses.warp[row]), ordinal=ordinal,
                     execution=int(accesses.execution[row]), kind=KINDS[int(accesses.kind[row])],
                     bytes=int(accesses.bytes[row]), matrices=int(accesses.matrices[row]),
                     address=accesses.address[row].copy(), source=source, code=code)


def explain_instruction(accesses: WarpAccesses, instruction: int, rules, text: str, warp: int | None = None,
                        ordinal: int | None = None, source: str | None = None, code: str | None = None,
                        aligned: list[str] | None = None) -> Picture:
    """The picture of one execution of ``instruction`` (the worst one unless ``warp``/``ordinal`` pick it):
    the engine's own lane assignment for it.  ``aligned``: the parameters without a value its copy sources are
    offsets from (:attr:`KernelAnalysis.aligned_sources`).  LookupError when it never executed or the pick does
    not exist."""
    rows = executions_of(accesses, instruction)
    if not len(rows):
        raise LookupError(f"instruction {instruction} never executed in the analysed launch")
    counts = analyze(accesses.take(rows), rules)
    row, ordinal = choose_row(accesses, rows, counts.column("wavefronts").to_numpy(), warp, ordinal)
    served = lane_wavefronts(accesses.take(np.array([row])), rules)
    op = int(accesses.op[row])
    # a copy counted from its global sources carries that rule's note (none where it has none)
    from_sources = bool(instructions_from_sources(accesses.take(np.array([row])), rules))
    note = rules.source_model_notes().get(op, "") if from_sources else rules.model_notes().get(op, "")
    if from_sources and aligned:
        note = with_assumption(note, aligned)
    execution = replace(execution_at(accesses, row, ordinal, text, rules.name, source, code), model_note=note)
    return picture(execution, rules, served)


# ---------------------------------------------------------------------------
# Terminal rendering
# ---------------------------------------------------------------------------

def _cell_labels(pic: Picture) -> dict[tuple[int, int], str]:
    """(wavefront, bank) → lane label; ``7+`` when several lanes share the word (broadcast/merge)."""
    labels: dict[tuple[int, int], list[int]] = {}
    for lane, bank, wave in zip(pic.lane.tolist(), pic.bank.tolist(), pic.wave.tolist()):
        labels.setdefault((wave, bank), []).append(lane)
    return {key: f"{min(lanes)}+" if len(set(lanes)) > 1 else str(lanes[0]) for key, lanes in labels.items()}


def header_text(pic: Picture) -> Text:
    e = pic.execution
    text = Text.assemble(("explain ", "bold"), f"{short_name(e.kernel)} [{e.instruction}] ",
                         (" ".join(e.text.split()), "bold"), "\n")
    if short_name(e.kernel) != e.kernel:
        text.append(f"kernel {e.kernel}\n", style="dim")
    if e.source:
        text.append(f"at {e.source}" + (f": {e.code}" if e.code else "") + "\n")
    text.append(
                         f"device {e.device}, CTA {e.cta}, warp {e.warp}, execution {e.ordinal} of this warp "
                         f"(id {e.execution}); {e.kind}, {e.bytes * 8} bits per lane, "
                         f"{int((e.address != INACTIVE).sum())} active lanes\n")
    excess = pic.wavefronts - pic.ideal_wavefronts
    text.append(f"{pic.wavefronts} wavefronts, ideal {pic.ideal_wavefronts}, excess {excess}, "
                f"worst {pic.max_ways}-way", style="bold red" if excess else "bold green")
    if e.model_note:
        text.append(f"\n{MODEL_MARK} {e.model_note}", style="yellow")
    return text


def legend(pic: Picture) -> Text:
    """What the row labels mean where the rules split accesses or add passes."""
    notes = []
    if pic.requests > 1:
        notes.append(f"r0…r{pic.requests - 1}: each lane's access is served as {pic.requests} separate requests")
    if any(row.extra for row in pic.rows):
        notes.append("extra: a wavefront the rule set adds to every active phase (extra_wavefronts)")
    return Text("\n".join(notes), style="dim")


def phase_summary(pic: Picture) -> Text:
    """One line per phase: its lanes, its wavefronts, and the banks served in several of them."""
    out = Text()
    conflicting = pic.conflicting()
    for p, lanes in enumerate(pic.phases):
        style = PHASE_STYLES[p % len(PHASE_STYLES)]
        out.append(f"phase {p}", style=f"bold {style}")
        out.append(f" lanes {lane_ranges(lanes)}: {pic.phase_wavefronts[p]} wavefront(s)")
        worst = []
        hot = conflicting & (pic.phase == p)
        for request, bank in sorted({(int(r), int(b)) for r, b in zip(pic.request[hot], pic.bank[hot])}):
            cells = (pic.phase == p) & (pic.request == request) & (pic.bank == bank)
            words = len(np.unique(pic.word[cells]))
            ways = len(np.unique(pic.wave[cells]))
            worst.append((ways, request, bank, words, sorted(set(pic.lane[cells].tolist()))))
        worst.sort(key=lambda w: (-w[0], w[1], w[2]))
        for ways, request, bank, words, lanes_hit in worst[:4]:
            where = f"r{request} bank {bank}" if pic.requests > 1 else f"bank {bank}"
            out.append(f"\n    {where}: {words} distinct word{'s' if words > 1 else ''} from lanes "
                       f"{lane_ranges(lanes_hit)} → {ways}-way")
        if len(worst) > 4:
            out.append(f"\n    … {len(worst) - 4} more conflicting bank(s)")
        out.append("\n")
    return out


def lane_listing(pic: Picture) -> Text:
    """``lane→bank/word`` for every active lane (first word of wide accesses)."""
    order = np.lexsort((pic.word, pic.request, pic.lane))
    lane, bank, word = pic.lane[order], pic.bank[order], pic.word[order]
    first = np.r_[True, lane[1:] != lane[:-1]] if len(lane) else np.zeros(0, bool)
    items = [f"{l}→b{b}/w{w}" for l, b, w in zip(lane[first].tolist(), bank[first].tolist(), word[first].tolist())]
    return Text("lane→bank/word: " + "  ".join(items), style="dim")


def grid(pic: Picture) -> Table:
    """Banks as columns, one row per wavefront, lane numbers in the cells, coloured by phase."""
    table = Table(show_header=True, header_style="bold", pad_edge=False, box=None, padding=(0, 0))
    table.add_column("wavefront", no_wrap=True)
    for bank in range(pic.banks):
        table.add_column(str(bank), justify="right", min_width=3, no_wrap=True)
    labels = _cell_labels(pic)
    hot = {(int(w), int(b)) for w, b, c in zip(pic.wave, pic.bank, pic.conflicting()) if c}
    for k, row in enumerate(pic.rows):
        style = PHASE_STYLES[row.phase % len(PHASE_STYLES)]
        cells = [Text(f"{pic.label(k)} ", style=style)]
        for bank in range(pic.banks):
            label = labels.get((k, bank), "")
            cells.append(Text(f" {label}" if label else "  ·",
                              style=f"bold {style} reverse" if (k, bank) in hot else style))
        table.add_row(*cells)
    return table


def render_terminal(pic: Picture) -> Group:
    notes = legend(pic)
    return Group(header_text(pic), grid(pic), *([notes] if notes.plain else []), phase_summary(pic),
                 lane_listing(pic))


def lane_ranges(lanes) -> str:
    """0,1,2,3,8 → "0–3,8"."""
    lanes = sorted(lanes)
    out, start = [], None
    for i, lane in enumerate(lanes):
        if start is None:
            start = lane
        if i + 1 == len(lanes) or lanes[i + 1] != lane + 1:
            out.append(str(start) if start == lane else f"{start}–{lane}")
            start = None
    return ",".join(out)


def worst_execution(accesses: WarpAccesses, instruction: int, text: str, rules) -> Picture:
    """The picture ``traceconf explain`` draws by default: the execution of ``instruction`` with the most
    wavefronts (LookupError if it never executed in ``accesses``)."""
    return explain_instruction(accesses, instruction, rules, text)
