"""One warp execution, lane by lane: which bank and word each lane hits, who collides, and why.

The picture is the one the classic bank-conflict tutorials draw by hand:
banks as columns, one row per wavefront (shared-memory pass), lane numbers in
the cells.  Lanes are first split into the device's lane groups ("phases":
half-warps on sm_1x, quarter-warps for 128-bit accesses on sm_90, one group per
8×8 matrix for ldmatrix ...), because lanes of different phases never share a
pass.  Inside a phase, distinct words of one bank serialise: the k-th distinct
word of a bank is served in the phase's k-th wavefront.  The engine's count for
the execution is printed next to the picture and is the authoritative number
(rules such as sm_1x's single-word broadcast cost more than the picture's
distinct-word rows, and the report says so).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.schemas import KINDS

MATRIX_KINDS = ("ldmatrix", "stmatrix")
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


@dataclass
class Picture:
    """Per-cell view of one execution under one rule set."""

    execution: Execution
    banks: int
    bank_bytes: int
    phases: list[tuple[int, ...]]     # active lanes of each phase that has any
    lane: np.ndarray                  # per cell: lane, bank, word, phase index, pass inside the phase
    bank: np.ndarray
    word: np.ndarray
    phase: np.ndarray
    wave: np.ndarray
    phase_wavefronts: list[int]       # picture's passes per phase (+ the rule's extra passes)
    wavefronts: int                   # engine: wavefronts of this execution (authoritative)
    ideal_wavefronts: int
    max_ways: int

    @property
    def picture_wavefronts(self) -> int:
        return int(sum(self.phase_wavefronts))

    def rows(self) -> list[tuple[int, int]]:
        """(phase index, pass) of every drawn wavefront row, in order."""
        return [(p, k) for p, n in enumerate(self.phase_wavefronts) for k in range(n)]

    def conflicting(self) -> np.ndarray:
        """Per cell: does its bank hold more than one distinct word inside its phase?"""
        key = self.phase * self.banks + self.bank
        most = np.zeros(len(self.phase_wavefronts) * self.banks, dtype=np.int64)
        np.maximum.at(most, key, self.wave + 1)
        return most[key] > 1


# ---------------------------------------------------------------------------
# Phases
# ---------------------------------------------------------------------------

def _paired(address: np.ndarray, partners: tuple[int, ...]) -> bool:
    """Load pairing: every active lane n reads the address of lane n^x, or n^x is inactive (any listed x)."""
    lanes = np.arange(len(address))
    active = address != INACTIVE
    for x in partners:
        other = address[lanes ^ x]
        if np.all(~active | (other == INACTIVE) | (other == address)):
            return True
    return False


def lane_groups(rules, kind: str, nbytes: int, matrices: int, address: np.ndarray) -> list[tuple[int, ...]]:
    """The device's lane groups for this access (all groups, active or not)."""
    if kind in MATRIX_KINDS and rules.matrix is not None:
        per = rules.matrix.lanes
        return [tuple(range(start, start + per)) for start in range(0, per * max(matrices, 1), per)]
    rule = rules.lane_group_rule(kind, nbytes)
    groups = [tuple(g) for g in rule.groups]
    pairing = rules.pairing
    if pairing is not None and pairing.applies(kind, nbytes) and _paired(address, pairing.partners):
        groups = [tuple(sorted(sum(groups[i:i + pairing.factor], ()))) for i in range(0, len(groups),
                                                                                     pairing.factor)]
    return groups


def _pass_of(phase: np.ndarray, bank: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Per cell: rank of its bank row among the distinct rows of its (phase, bank) — the pass serving it."""
    if not len(row):
        return np.zeros(0, dtype=np.int64)
    unique, inverse = np.unique(np.stack([phase, bank, row], axis=1), axis=0, return_inverse=True)
    new_bank = np.r_[True, np.any(unique[1:, :2] != unique[:-1, :2], axis=1)]
    first_of_bank = np.maximum.accumulate(np.where(new_bank, np.arange(len(unique)), 0))
    return (np.arange(len(unique)) - first_of_bank)[inverse.reshape(-1)]


def picture(execution: Execution, rules, counts: dict) -> Picture:
    """Cells of one execution; ``counts`` holds the engine's wavefronts/ideal_wavefronts/max_ways."""
    address = execution.address
    groups = lane_groups(rules, execution.kind, execution.bytes, execution.matrices, address)
    active = address != INACTIVE
    phase_of = np.full(len(address), -1, dtype=np.int64)
    phases = []
    for group in groups:
        lanes = [lane for lane in group if active[lane]]
        if lanes:
            phase_of[lanes] = len(phases)
            phases.append(tuple(lanes))
    bank_bytes = rules.bank_bytes
    words_per_lane = max(1, -(-execution.bytes // bank_bytes))
    lanes = np.nonzero(phase_of >= 0)[0]
    lane = np.repeat(lanes, words_per_lane)
    word = (address[lane] // bank_bytes) + np.tile(np.arange(words_per_lane), len(lanes))
    phase = phase_of[lane]
    bank = word % rules.banks
    # Distinct bank rows serialise (a row is banks × bank_bytes on most devices; Kepler's 4-byte mode has
    # 256-byte rows, so words i and i+32 of one row share a pass) — the engine's key, drawn per word.
    wave = _pass_of(phase, bank, word * bank_bytes // rules.row_bytes)
    extra = 0 if execution.kind in MATRIX_KINDS else rules.lane_group_rule(execution.kind,
                                                                          execution.bytes).extra_wavefronts
    phase_wavefronts = []
    for p in range(len(phases)):
        in_phase = wave[phase == p]
        phase_wavefronts.append(int(in_phase.max()) + 1 + extra if len(in_phase) else 0)
    return Picture(execution, rules.banks, bank_bytes, phases, lane, bank, word, phase, wave, phase_wavefronts,
                   int(counts["wavefronts"]), int(counts["ideal_wavefronts"]), int(counts["max_ways"]))


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


def execution_at(accesses: WarpAccesses, row: int, ordinal: int, text: str, device: str) -> Execution:
    return Execution(kernel=accesses.kernel, instruction=int(accesses.instruction[row]), text=text, device=device,
                     cta=int(accesses.cta[row]), warp=int(accesses.warp[row]), ordinal=ordinal,
                     execution=int(accesses.execution[row]), kind=KINDS[int(accesses.kind[row])],
                     bytes=int(accesses.bytes[row]), matrices=int(accesses.matrices[row]),
                     address=accesses.address[row].copy())


# ---------------------------------------------------------------------------
# Terminal rendering
# ---------------------------------------------------------------------------

def _cell_labels(pic: Picture) -> dict[tuple[int, int, int], str]:
    """(phase, pass, bank) → lane label; ``7+`` when several lanes share the word (broadcast/merge)."""
    labels: dict[tuple[int, int, int], list[int]] = {}
    for lane, bank, phase, wave in zip(pic.lane.tolist(), pic.bank.tolist(), pic.phase.tolist(), pic.wave.tolist()):
        labels.setdefault((phase, wave, bank), []).append(lane)
    return {key: f"{min(lanes)}+" if len(set(lanes)) > 1 else str(lanes[0]) for key, lanes in labels.items()}


def header_text(pic: Picture) -> Text:
    e = pic.execution
    text = Text.assemble(("explain ", "bold"), f"{e.kernel} [{e.instruction}] ", (" ".join(e.text.split()), "bold"),
                         "\n",
                         f"device {e.device}, CTA {e.cta}, warp {e.warp}, execution {e.ordinal} of this warp "
                         f"(id {e.execution}); {e.kind}, {e.bytes * 8} bits per lane, "
                         f"{int((e.address != INACTIVE).sum())} active lanes\n")
    excess = pic.wavefronts - pic.ideal_wavefronts
    text.append(f"{pic.wavefronts} wavefronts, ideal {pic.ideal_wavefronts}, excess {excess}, "
                f"worst {pic.max_ways}-way", style="bold red" if excess else "bold green")
    if pic.picture_wavefronts != pic.wavefronts:
        text.append(f"\nnote: the grid shows distinct words per bank ({pic.picture_wavefronts} rows); "
                    f"{e.device}'s rules count {pic.wavefronts} (e.g. single-word broadcast or access splitting)",
                    style="yellow")
    return text


def phase_summary(pic: Picture) -> Text:
    """One line per phase: its lanes, its passes, and the banks that serialise."""
    out = Text()
    for p, lanes in enumerate(pic.phases):
        style = PHASE_STYLES[p % len(PHASE_STYLES)]
        out.append(f"phase {p}", style=f"bold {style}")
        out.append(f" lanes {lane_ranges(lanes)}: {pic.phase_wavefronts[p]} wavefront(s)")
        in_phase = pic.phase == p
        worst = []
        for bank in np.unique(pic.bank[in_phase]).tolist():
            cells = in_phase & (pic.bank == bank)
            words = np.unique(pic.word[cells])
            if len(words) > 1:
                worst.append((len(words), bank, sorted(set(pic.lane[cells].tolist()))))
        worst.sort(key=lambda w: (-w[0], w[1]))
        for ways, bank, lanes_hit in worst[:4]:
            out.append(f"\n    bank {bank}: {ways} distinct words from lanes {lane_ranges(lanes_hit)} → {ways}-way")
        if len(worst) > 4:
            out.append(f"\n    … {len(worst) - 4} more conflicting bank(s)")
        out.append("\n")
    return out


def lane_listing(pic: Picture) -> Text:
    """``lane→bank/word`` for every active lane (first word of wide accesses)."""
    first = np.r_[True, pic.lane[1:] != pic.lane[:-1]] if len(pic.lane) else np.zeros(0, bool)
    items = [f"{l}→b{b}/w{w}" for l, b, w in zip(pic.lane[first].tolist(), pic.bank[first].tolist(),
                                                 pic.word[first].tolist())]
    return Text("lane→bank/word: " + "  ".join(items), style="dim")


def grid(pic: Picture) -> Table:
    """Banks as columns, one row per wavefront, lane numbers in the cells, coloured by phase."""
    table = Table(show_header=True, header_style="bold", pad_edge=False, box=None, padding=(0, 0))
    table.add_column("wavefront", no_wrap=True)
    for bank in range(pic.banks):
        table.add_column(str(bank), justify="right", min_width=3, no_wrap=True)
    labels = _cell_labels(pic)
    conflict_banks = {(int(p), int(b)) for p, b, c in zip(pic.phase, pic.bank, pic.conflicting()) if c}
    for p, k in pic.rows():
        style = PHASE_STYLES[p % len(PHASE_STYLES)]
        cells = [Text(f"p{p} wf{k} ", style=style)]
        for bank in range(pic.banks):
            label = labels.get((p, k, bank), "")
            hot = (p, bank) in conflict_banks and label
            cells.append(Text(f" {label}" if label else "  ·", style=f"bold {style} reverse" if hot else style))
        table.add_row(*cells)
    return table


def render_terminal(pic: Picture) -> Group:
    return Group(header_text(pic), grid(pic), phase_summary(pic), lane_listing(pic))


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
