#!/usr/bin/env python3
"""Configurations of the LDGSTS ignore-src probes (ldgsts_ignore_src.cu) and their manifest.

    python3 scripts/hw/ldgsts_ignore_src.py configs OUT.txt         # the driver's input
    python3 scripts/hw/ldgsts_ignore_src.py manifest SUMMARY OUT.csv  # the summary's rows with each copy's form
    python3 scripts/hw/ldgsts_ignore_src.py trim PAGES OUT            # pages cut to the rows the tests read
    python3 scripts/hw/ldgsts_ignore_src.py fit MANIFEST              # rows the fitted count equals, per variant

Every configuration is one global/shared pattern of the LDGSTS.BYPASS probes (ldgsts_probe.py) times one
choice of the lanes that read (the others zero-fill), for every variant of the kernel at once; the `.ZFILL`
variant's src-size register is 16 where the lane reads and 0 where not, except in the ``sizes_*`` sets
(every lane reads in the other variants).  The pages are exported and summarised by ldgsts_probe.py.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

REPS = 3
CHUNK = 16
LINE = 128
LANES = range(32)

#: Variant -> (SASS form as compiled by nvcc 13.0 for sm_90, the bit it tests, whether a set bit means the lane
#: reads).  Each variant's destination is 4096 B past the previous one's, which names its pc in the SASS.
VARIANTS = {
    0: ("@P0 LDGSTS.E.BYPASS.128 (guard)", 0, True),
    1: ("LDGSTS.E.BYPASS.128 ..., P1 (selp 16, 0)", 1, True),
    2: ("LDGSTS.E.BYPASS.128 ..., !P2 (selp 16, 0 on the complement)", 2, False),
    3: ("LDGSTS.E.BYPASS.128 ..., P3 (ignore-src operand)", 3, True),
    4: ("LDGSTS.E.BYPASS.128 ..., !P4 (ignore-src operand)", 4, False),
    5: ("LDGSTS.E.BYPASS.128.ZFILL ..., P3 (src-size register)", None, True),
    6: ("LDGSTS.E.BYPASS.128 ..., P6 (ignore-src, three live)", 6, True),
    7: ("LDGSTS.E.BYPASS.128 ..., !P5 (ignore-src, three live)", 7, False),
    8: ("LDGSTS.E.BYPASS.128 ..., P0 (ignore-src, three live)", 8, True),
    9: ("@P1 LDGSTS.E.BYPASS.128 ..., P2 (guard on + selp 16, 0)", 10, True),
    10: ("LDGSTS.E.BYPASS.128.ZFILL [...], [R.64+0x8] (src-size 8 immediate)", None, True),
}
GUARD_BIT = 9  # v9's guard: on in every lane


def patterns() -> dict[str, tuple[list[int], list[int]]]:
    """(global offsets, shared offsets) per lane, as the ldgsts_probe configurations of the same names."""
    contiguous = [CHUNK * l for l in LANES]
    swizzled = [CHUNK * (8 * (l // 8) + ((l % 8) ^ (l // 8))) for l in LANES]
    return {
        "base": (contiguous, contiguous),
        "triton_a_h0": ([512 * (l // 4) + CHUNK * (l % 4) for l in LANES], swizzled),
        "triton_a_h1": ([512 * (l // 4) + 64 + CHUNK * (l % 4) for l in LANES], swizzled),
        "hgemm_k0": ([8192 * (l // 2) + CHUNK * (l % 2) for l in LANES], contiguous),
        "src_rot1": ([CHUNK * (l + 1) for l in LANES], contiguous),
    }


#: Lanes that read, per set; the others zero-fill.
READS = {
    "all": [True] * 32,
    "none": [False] * 32,
    "even": [l % 2 == 0 for l in LANES],
    "low16": [l < 16 for l in LANES],
    "first8": [l < 8 for l in LANES],
    "notlane0": [l > 0 for l in LANES],
}
#: src-size register of the .ZFILL variant per lane, every lane reading in the others.
SIZES = {"sizes_mixed": [(16, 12, 8, 4, 0)[l % 5] for l in LANES], "sizes_8": [8] * 32}


def flags(reads: list[bool]) -> list[int]:
    return [sum(1 << bit for bit, means_read in ((b, m) for _, b, m in VARIANTS.values() if b is not None)
                if read == means_read) | 1 << GUARD_BIT for read in reads]


def configs() -> list[tuple[str, list[int]]]:
    out = []
    for pattern, (gofs, sofs) in patterns().items():
        for name, reads in READS.items():
            out.append((f"{pattern}__{name}", gofs + sofs + flags(reads) + [16 if r else 0 for r in reads]))
        for name, sizes in SIZES.items():
            out.append((f"{pattern}__{name}", gofs + sofs + flags(READS["all"]) + sizes))
    return out


def annotated(summary: Path, out: Path, fields: list[str], describe) -> None:
    """The summary's rows (one per launch and LDGSTS pc) with their variant (the copy's destination offset / 4096,
    which names its form) and the ``fields`` that ``describe(row, variant)`` gives."""
    rows = list(csv.DictReader(open(summary, newline="")))
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, ["variant", *fields] + list(rows[0]))
        writer.writeheader()
        for row in rows:
            shared = row["source"].rsplit("[", 1)[1].split("]")[0]  # Nsight's order: `desc[..][R4.64], P3, [R7+0x5000]`
            variant = int(shared.split("+")[1], 16) // 4096 if "+" in shared else 0
            writer.writerow(dict(row, variant=variant, **describe(row, variant)))


def src_size_manifest(summary: Path, out: Path, sizes: dict[str, list[int]], zfill: int, immediate: int) -> None:
    """The summary's rows with the variant, its form, the configuration's pattern (its name before ``__``) and the
    src-sizes: ``sizes[config]`` for the register ``.ZFILL`` copy (variant ``zfill``), 8 for ``immediate``."""
    def describe(row: dict, variant: int) -> dict:
        src_size = {zfill: " ".join(map(str, sizes[row["config"]])), immediate: "8 (immediate)"}.get(
            variant, "16/0" if variant else "guard")
        return dict(form=VARIANTS[variant][0], pattern=row["config"].partition("__")[0], src_size=src_size)
    annotated(summary, out, ["form", "pattern", "src_size"], describe)


def write_csv(rows: list[dict], path: str) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def command_line(doc: str, configs, reps, manifest, **commands) -> None:
    """A table probe's script: ``configs PATH`` (the driver's input: ``configs()``, each launched ``reps`` times,
    or ``reps(name)`` times where ``reps`` is a function), ``manifest SUMMARY OUT`` and ``NAME ARGS...`` for
    ``commands[NAME](*ARGS)``; the script's ``doc`` else."""
    commands = {"configs": lambda path: write_configs(Path(path), configs(), reps),
                "manifest": lambda summary, out: manifest(Path(summary), Path(out)), **commands}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(doc)
    commands[sys.argv[1]](*sys.argv[2:])


def write_configs(path: Path, configs: list[tuple[str, list[int]]], reps) -> None:
    """The driver's input: per configuration ``name reps`` and its tables on the next line; ``reps`` a count or
    a function of the name."""
    with open(path, "w") as f:
        for name, tables in configs:
            f.write(f"{name} {reps(name) if callable(reps) else reps}\n{' '.join(map(str, tables))}\n")


def manifest(summary: Path, out: Path) -> None:
    """The summary's rows (one per launch and LDGSTS pc) with the variant, its form and each lane's choice."""
    def describe(row: dict, variant: int) -> dict:
        pattern, _, lanes = row["config"].partition("__")
        zfill = VARIANTS[variant][1] is None
        sizes = (SIZES[lanes] if lanes in SIZES else [16 if r else 0 for r in READS[lanes]]) if zfill else []
        return dict(form=VARIANTS[variant][0], pattern=pattern, lanes_read=lanes if lanes in READS else "all",
                    src_size=("8 (immediate)" if variant == 10 else " ".join(map(str, sizes)))
                    if zfill else ("16/0" if variant else "guard"))
    annotated(summary, out, ["form", "pattern", "lanes_read", "src_size"], describe)


def src_sizes(variant: int, lanes: str) -> list[int]:
    """The bytes each lane of a variant copies from its source (ACCESSES ``src_size``): 16 where it reads and 0
    where it zero-fills; the `.ZFILL` ones their src-size (v5 its register, v10 8)."""
    if variant == 10:
        return [8] * 32
    if variant == 5 and lanes in SIZES:
        return SIZES[lanes]
    return [16 * read for read in READS.get(lanes, READS["all"])]


def fitted(pattern: str, variant: int, sizes: list[int]) -> tuple[int, int]:
    """docs/hardware.md "LDGSTS ignore-src probes": (wavefronts, ideal) of a variant's copy whose lanes read
    ``sizes`` bytes (:func:`src_sizes`), as sm_90 counts it from the sources and src-sizes (docs/rules.md "Copies
    from their sources": the sources rule of the guarded form over the reading lanes, and with a fill pass,
    where a lane zero-fills or the copy is `.ZFILL`, per quarter-warp its contiguous source runs among its
    reading lanes, the larger count of those reading first and second halves of their 32-byte source sectors,
    or a 16-byte store's passes, 1 at these destinations, where larger); the scalar reference's figures."""
    from traceconf.reference import execution_cost
    from traceconf.rules import load_rule_set

    gofs, sofs = patterns()[pattern]
    op = "bypass_zfill" if VARIANTS[variant][1] is None else "bypass"
    cost = execution_cost(load_rule_set("sm_90"), "cp_async", CHUNK, 0, sofs, op, gofs, sizes)
    return cost.wavefronts, cost.ideal_wavefronts


def fit(manifest_path: Path, sizes=None) -> dict[tuple[int, bool], int]:
    """Rows per (variant, whether the fitted count equals the page's); the P0 variants 0 and 8 left out.
    ``sizes(variant, lanes)``: the src-sizes of a configuration's copy (default :func:`src_sizes`)."""
    counts: dict[tuple[int, bool], int] = {}
    for row in csv.DictReader(open(manifest_path, newline="")):
        variant = int(row["variant"])
        if variant in (0, 8):
            continue
        model = fitted(row["pattern"], variant, (sizes or src_sizes)(variant, row["config"].partition("__")[2]))
        key = (variant, model == (int(row["wavefronts"]), int(row["ideal"])))
        counts[key] = counts.get(key, 0) + 1
    return counts


def trim(pages: Path, out: Path) -> None:
    """Each page cut to its kernel line, header, first instruction (the base address) and shared-memory rows."""
    out.mkdir(parents=True, exist_ok=True)
    for page in sorted(pages.glob("*.csv")):
        rows = list(csv.reader(open(page, newline="")))
        start = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
        kept = rows[:start + 2] + [r for r in rows[start + 2:] if len(r) > 1 and any(
            op in r[1] for op in ("LDGSTS", "LDS", "STS"))]
        with open(out / page.name, "w", newline="") as f:
            csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(kept)


if __name__ == "__main__":
    def print_fit(manifest_path):
        for (variant, equal), rows in sorted(fit(Path(manifest_path)).items()):
            print(f"v{variant} {'equal' if equal else 'differ'}: {rows}")
    command_line(__doc__, configs, REPS, manifest, fit=print_fit, trim=lambda pages, out: trim(Path(pages), Path(out)))
