"""GPGPU-Sim's per-PTX-line shared-memory counters beside the prediction for the same PTX.

GPGPU-Sim (``-enable_ptx_file_line_stats``, on by default) writes
``gpgpu_inst_stats.txt``: per (PTX file, PTX line) ``smem_warp`` = warp
instructions that accessed shared memory and ``smem_bk_conflicts`` = the sum of
their *cycles*, where one warp instruction costs (``warp_inst_t::
generate_mem_accesses``, ../shared/reference/trace_formats.md §2.2)::

    sum over the -gpgpu_shmem_warp_parts sub-warps of
        max over the -gpgpu_shmem_num_banks banks of
            distinct 4-byte words of that bank the sub-warp's active lanes touch
            (-gpgpu_shmem_limited_broadcast 1: every lane counts, except that the
             first word (lowest bank, then lowest word) asked for by several lanes
             counts once)

Only each lane's first byte is looked at: an 8- or 16-byte access is one word,
so GPGPU-Sim cannot see the extra passes vector widths cost on real hardware,
nor sm_70+ load pairing, nor Kepler's 8-byte bank rows.  A fully predicated-off
warp instruction is not counted; an N-way instruction stalls the LD/ST unit
N-1 extra cycles, so ``smem_bk_conflicts - smem_warp`` are its conflict cycles.

This module lines those rows up, by PTX line, with traceconf's per-device
wavefronts, and replays GPGPU-Sim's own rule on the emulated accesses (the
"model" columns): model = GPGPU-Sim says the emulation reproduces GPGPU-Sim's
run; model ≠ GPGPU-Sim points at a different launch, input data or PTX; model =
GPGPU-Sim ≠ device prediction is the difference between GPGPU-Sim's bank model
and the device's rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from traceconf.accesses import INACTIVE
from traceconf.errors import InputError
from traceconf.pipeline import KernelAnalysis
from traceconf.analyses.results import kernel_table

#: GPGPU-Sim's WORD_SIZE (src/abstract_hardware_model.h): banks are 4-byte words, whatever the access width.
WORD_BYTES = 4
#: The per-line GPGPU-Sim counters shown (names as in gpgpu_inst_stats.txt).
STATS_KEYS = ("count", "smem_warp", "smem_bk_conflicts")
PREDICTED_KEYS = ("executions", "wavefronts", "excess_wavefronts")

COUNTS_NOTE = {
    "gpgpusim": "smem_warp = warp instructions with shared accesses; smem_bk_conflicts = their cycles, the "
                "n-way degree summed (1 per conflict-free instruction, N for N-way), not extra cycles; "
                "extra_cycles = smem_bk_conflicts - smem_warp = bank-conflict stall cycles; count = threads. "
                "Summed over every launch GPGPU-Sim ran.",
    "model": "GPGPU-Sim's rule replayed on traceconf's emulated accesses for the given launch (warps, cycles).",
    "predicted": "traceconf's rule set per --device: executions = warp instructions, wavefronts = shared-memory "
                 "passes (comparable to GPGPU-Sim's cycles), excess = wavefronts - ideal (comparable to "
                 "extra_cycles).",
    "delta": "predicted wavefronts - GPGPU-Sim smem_bk_conflicts, per device; model_delta = model cycles - "
             "smem_bk_conflicts.",
}


@dataclass(frozen=True)
class BankModel:
    """GPGPU-Sim's shared-memory options; the defaults are every shipped tested-cfgs config (Fermi to H100)."""

    banks: int = 32                   # -gpgpu_shmem_num_banks
    warp_parts: int = 1               # -gpgpu_shmem_warp_parts
    limited_broadcast: bool = False   # -gpgpu_shmem_limited_broadcast

    def options(self) -> dict:
        return {"gpgpu_shmem_num_banks": self.banks, "gpgpu_shmem_warp_parts": self.warp_parts,
                "gpgpu_shmem_limited_broadcast": int(self.limited_broadcast)}

    def check(self, warp_size: int = 32) -> None:
        if self.banks < 1:
            raise InputError(f"--shmem-banks must be at least 1, got {self.banks}")
        if self.warp_parts < 1 or warp_size % self.warp_parts:
            raise InputError(f"--shmem-warp-parts must divide the warp size {warp_size}, got {self.warp_parts}")


def closest_rule_set(model: BankModel) -> tuple[str, str]:
    """The traceconf rule set nearest to a GPGPU-Sim configuration, and why."""
    if model.banks == 16:
        return "sm_1x", ("16 banks in half-warps with one broadcast word is the CC 1.x rule (sm_1x); GPGPU-Sim "
                         "picks the lowest bank's word to broadcast, sm_1x the most requested one")
    return "sm_50", ("for 1-4-byte accesses the shipped configs (32 banks, whole warp, any number of broadcast "
                     "words) count exactly what sm_2x and sm_50-sm_90 count (not sm_3x: its 8-byte bank rows "
                     "let words i and i+32 share a pass); no rule set looks at one word per lane, so 8/16-byte "
                     "and ldmatrix lines differ on every device (sm_50: no load pairing)")


def model_cycles(address: np.ndarray, model: BankModel = BankModel()) -> np.ndarray:
    """GPGPU-Sim's cycles for each warp execution (rows of a WarpAccesses address array); 0 when no lane is active."""
    n, width = address.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lanes = width // model.warp_parts
    sub = address.reshape(n * model.warp_parts, lanes)
    active = sub != INACTIVE
    word = np.where(active, sub // WORD_BYTES, -1)
    bank = np.where(active, word % model.banks, -1)
    order = np.lexsort((word, bank), axis=-1)          # per sub-warp: by bank, then word; inactive first
    word_s = np.take_along_axis(word, order, axis=-1)
    bank_s = np.take_along_axis(bank, order, axis=-1)
    active_s = word_s >= 0
    repeat = np.zeros_like(active_s)
    repeat[:, 1:] = active_s[:, 1:] & (word_s[:, 1:] == word_s[:, :-1])
    rows = np.broadcast_to(np.arange(len(sub))[:, None], sub.shape)
    # limited broadcast counts every lane; otherwise a bank costs its distinct words
    counted = active_s if model.limited_broadcast else active_s & ~repeat
    per_bank = np.bincount((rows * model.banks + bank_s)[counted], minlength=len(sub) * model.banks)
    per_bank = per_bank.reshape(len(sub), model.banks)
    if model.limited_broadcast:
        has = repeat.any(axis=1)
        # the first repeated word in (bank, word) order is GPGPU-Sim's broadcast word: its lanes count once
        first = np.argmax(repeat, axis=1)
        chosen = word_s[np.arange(len(sub)), first]
        requests = ((word_s == chosen[:, None]) & active_s).sum(axis=1)
        hit = np.nonzero(has)[0]
        per_bank[hit, chosen[hit] % model.banks] -= requests[hit] - 1
    return per_bank.max(axis=1).reshape(n, model.warp_parts).sum(axis=1).astype(np.int64)


# ---------------------------------------------------------------------------
# Matching the stats file to the PTX
# ---------------------------------------------------------------------------

def rows_for_ptx(stats: pa.Table, ptx_name: str, stats_path: str) -> pa.Table:
    """The stats rows of the PTX file named ``ptx_name`` (compared by base name)."""
    names = stats.column("ptx_file").to_pylist()
    keep = [Path(name).name == Path(ptx_name).name for name in names]
    if not any(keep):
        found = ", ".join(sorted(set(names))) or "no rows at all"
        raise InputError(f"no statistics for {Path(ptx_name).name} (the file holds: {found}); GPGPU-Sim names "
                         f"the PTX it extracts from a binary _N.ptx (keep it with -save_embedded_ptx 1): compare "
                         f"that exact file, or pass --ptx-name NAME if FILE.ptx is a copy of it", file=stats_path)
    return stats.filter(pa.array(keep))


# ---------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------

@dataclass
class Comparison:
    """GPGPU-Sim vs prediction, one row per PTX line (dicts, JSON-ready)."""

    stats_path: str
    ptx_path: str
    ptx_name: str
    model: BankModel
    devices: list[str]
    lines: list[dict]
    totals: dict
    notes: list[str] = field(default_factory=list)


def _our_lines(analysis: KernelAnalysis, devices: list[str], model: BankModel) -> dict[int, dict]:
    """Per PTX line of one kernel: text, kind, width, per-device counts and GPGPU-Sim's rule replayed."""
    lines: dict[int, dict] = {}
    for device in devices:
        for row in kernel_table(analysis, device).to_pylist():
            line = lines.setdefault(row["ptx_line"], {
                "kernel": analysis.kernel, "ptx": [], "kind": row["kind"], "width_bits": row["width_bits"],
                "predicted": {d: dict.fromkeys(PREDICTED_KEYS, 0) for d in devices}, "model": None})
            if device == devices[0]:
                line["ptx"].append(row["text"])
            for key in PREDICTED_KEYS:
                line["predicted"][device][key] += row[key]
    accesses = analysis.accesses.get(32)
    if accesses is not None:
        scale = int(analysis.launch.get("scale", 1))
        ptx_line = dict(zip(analysis.instructions.column("instruction").to_pylist(),
                            analysis.instructions.column("ptx_line").to_pylist()))
        cycles = model_cycles(accesses.address, model)
        counted = cycles > 0                              # predicated-off warps are not counted by GPGPU-Sim
        # each kept execution stands for the CTAs of its class (or the launch's scale)
        weights = analysis.weights.get(32)
        if weights is None or len(weights) != len(accesses):
            weights = np.full(len(accesses), scale, dtype=np.int64)
        ids, inverse = np.unique(accesses.instruction[counted], return_inverse=True)
        warps = np.bincount(inverse, weights=weights[counted].astype(np.float64), minlength=len(ids))
        sums = np.bincount(inverse, weights=cycles[counted] * weights[counted].astype(np.float64),
                           minlength=len(ids))
        for line in lines.values():
            line["model"] = {"warps": 0, "cycles": 0}
        for ident, w, c in zip(ids.tolist(), warps.tolist(), sums.tolist()):
            model_row = lines[ptx_line[ident]]["model"]
            model_row["warps"] += int(round(w))
            model_row["cycles"] += int(round(c))
    return lines


def _gpgpusim_counts(row: dict | None) -> dict:
    counts = {key: (row[key] if row else 0) for key in STATS_KEYS}
    counts["extra_cycles"] = counts["smem_bk_conflicts"] - counts["smem_warp"]
    counts["mean_ways"] = round(counts["smem_bk_conflicts"] / counts["smem_warp"], 3) if counts["smem_warp"] else None
    return counts


def compare(stats: pa.Table, analyses: list[KernelAnalysis], devices: list[str], model: BankModel,
            stats_path: str, ptx_path: str, ptx_name: str) -> Comparison:
    """``stats``: GPGPUSIM_STATS rows of this PTX file (see :func:`rows_for_ptx`)."""
    ours: dict[int, dict] = {}
    notes: list[str] = []
    for analysis in analyses:
        ours.update(_our_lines(analysis, devices, model))
        notes += [f"{analysis.kernel}: {note}" for note in analysis.notes]
        if analysis.unresolved:
            notes.append(f"{analysis.kernel}: {len(analysis.unresolved)} shared instruction(s) with unknown "
                         f"addresses count 0 on the traceconf side (see traceconf analyze)")
        if 32 not in analysis.accesses:
            notes.append(f"{analysis.kernel}: no 32-lane emulation (every --device has another warp size), "
                         f"so GPGPU-Sim's rule is not replayed")
    theirs = {row["ptx_line"]: row for row in stats.to_pylist()}
    shared = {line for line, row in theirs.items() if row["smem_warp"] or row["smem_bk_conflicts"]}
    strangers = sorted(shared - set(ours))
    if strangers:
        listing = ", ".join(map(str, strangers[:10])) + (" ..." if len(strangers) > 10 else "")
        notes.append(f"GPGPU-Sim counted shared accesses on {len(strangers)} line(s) that are not shared-memory "
                     f"instructions of the analysed kernels of {Path(ptx_path).name} ({listing}): another kernel "
                     f"(--kernel), or not the PTX file GPGPU-Sim loaded?")
    rows = []
    for number in sorted(set(ours) | shared):
        mine = ours.get(number)
        gpgpusim = _gpgpusim_counts(theirs.get(number))
        row = {"ptx_line": number,
               "kernel": mine["kernel"] if mine else None,
               "ptx": " ; ".join(mine["ptx"]) if mine else None,
               "kind": mine["kind"] if mine else None,
               "width_bits": mine["width_bits"] if mine else None,
               "gpgpusim": gpgpusim,
               "model": mine["model"] if mine else None,
               "predicted": mine["predicted"] if mine else None}
        row["delta"] = ({d: row["predicted"][d]["wavefronts"] - gpgpusim["smem_bk_conflicts"] for d in devices}
                        if mine else None)
        row["model_delta"] = (row["model"]["cycles"] - gpgpusim["smem_bk_conflicts"]) if row["model"] else None
        rows.append(row)
    return Comparison(stats_path, ptx_path, ptx_name, model, devices, rows, _totals(rows, devices), notes)


def _totals(rows: list[dict], devices: list[str]) -> dict:
    gpgpusim = {key: sum(r["gpgpusim"][key] for r in rows) for key in (*STATS_KEYS, "extra_cycles")}
    modelled = [r["model"] for r in rows if r["model"] is not None]
    model = {key: sum(m[key] for m in modelled) for key in ("warps", "cycles")} if modelled else None
    matched = [r for r in rows if r["predicted"] is not None]
    predicted = {d: {key: sum(r["predicted"][d][key] for r in matched) for key in PREDICTED_KEYS} for d in devices}
    return {"gpgpusim": gpgpusim, "model": model, "predicted": predicted,
            "delta": {d: predicted[d]["wavefronts"] - gpgpusim["smem_bk_conflicts"] for d in devices},
            "model_delta": model["cycles"] - gpgpusim["smem_bk_conflicts"] if model else None}
