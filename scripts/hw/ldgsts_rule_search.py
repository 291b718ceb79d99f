#!/usr/bin/env python3
"""Candidate rules of Nsight's LDGSTS.BYPASS count from sources and destinations, against every committed row.

    python3 scripts/hw/ldgsts_rule_search.py            # fit counts of every candidate, the best first
    python3 scripts/hw/ldgsts_rule_search.py --misses   # and which rows each of the best misses
    python3 scripts/hw/ldgsts_rule_search.py --only TEXT  # only the candidates whose name holds TEXT

The rows: the guarded copy (pc 0x620) of the 106 guarded ldgsts_probe configurations (per launch, every warp,
copy and CTA as the kernel computes them), and the 360 rows of the ldgsts_ignore_src pages' first launches but
the two P0 forms (the other two launches repeat them; each copy's reading lanes counted by the candidate, its
fill pass as sm_90 counts it); and, counted apart, the 243 configurations of the fitting group
(tests/data/hw/ldgsts_probe/fit, ``ldgsts_probe.fit_configs``) and the 333 of the repeated sources
(tests/data/hw/ldgsts_probe/repeats, ``ldgsts_probe.repeat_configs`` and ``check_configs``).
The wmma, hgemm and Triton copies are probe configurations too (``wmma_c_j*``, ``hgemm_k*``, ``triton_a*``).
A candidate counts one warp's copy from ``{lane: destination}`` of its reading lanes and every lane's source.
Candidates whose old probe rows miss 10 more than sm_90's are not run on the ignore-src rows. Families tried
(docs/hardware.md "LDGSTS.BYPASS probes"): how lanes form requests (the k-th lane to read a 16-byte chunk or
sector, or chunk into a row, counted from the lowest or the highest lane; in lane order, a new request where a
chunk repeats, warp-wide, per source line or per (line, row)), how a request's lanes group (source line at 64 or 128 bytes, destination row at 128 or 256), the key
a group counts (source XOR destination chunk mod 2/4/8, their difference, with the sector pairing or not, or the pairing
with an unpaired lane keyed by its source half: ``sector_or_source_half``, sm_90's since issue 21), and
wavefronts held open in order (a cache of 1-16 keys, LRU or FIFO, lanes forward or backward).
"""

from __future__ import annotations

import csv
import itertools
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

import ldgsts_ignore_src  # noqa: E402
import ldgsts_probe  # noqa: E402
from traceconf.reference import _from_sources, execution_cost  # noqa: E402
from traceconf.rules import load_rule_set  # noqa: E402

SM90 = load_rule_set("sm_90")
DATA = REPO / "tests" / "data" / "hw"
GUARDED_PC = "0x620"


def probe_rows(configs=ldgsts_probe.configs, manifest: Path = DATA / "ldgsts_probe" / "manifest.csv",
               groups: str = "cache_all") -> list[tuple[str, list, int, int]]:
    """(name, [(destinations, sources)] of one CTA, CTAs, page wavefronts per launch) per guarded configuration
    of ``configs`` (the manifest's groups starting ``groups``); the CTAs' sources differ by whole lines, which no
    candidate tells apart."""
    pages = {(r["config"]): int(r["wavefronts"]) for r in csv.DictReader(open(manifest))
             if r["group"].startswith(groups) and r["rep"] == "0" and r["pc"] == GUARDED_PC}
    rows = []
    for c in configs():
        if c["mode"] & ldgsts_probe.SRCSIZE:
            continue
        assert c["cta_stride"] % ldgsts_probe.LINE == 0
        executions = []
        for copy in range(c["copies"]):
            for first in range(0, c["threads"], 32):
                lanes = range(first, min(first + 32, c["threads"]))
                if any(c["flags"][t] & 1 for t in lanes):
                    destinations = {t - first: c["sofs"][t] + copy * c["sstep"] for t in lanes if c["flags"][t] & 1}
                    executions.append((destinations, [c["gofs"][t] + copy * c["gstep"] for t in lanes]))
        rows.append((c["name"], executions, c["grid"], pages[c["name"]]))
    return rows


def ignore_src_rows() -> list[tuple[str, dict, list, int, int]]:
    """(config and variant, reading lanes' destinations, sources, sm_90's fill pass, page wavefronts)."""
    rows = []
    for r in csv.DictReader(open(DATA / "ldgsts_ignore_src" / "manifest.csv")):
        variant = int(r["variant"])
        if r["rep"] != "0" or variant in (0, 8):
            continue
        gofs, sofs = ldgsts_ignore_src.patterns()[r["pattern"]]
        sizes = ldgsts_ignore_src.src_sizes(variant, r["config"].partition("__")[2])
        op = "bypass_zfill" if ldgsts_ignore_src.VARIANTS[variant][1] is None else "bypass"
        reading = {lane: sofs[lane] for lane in range(32) if sizes[lane]}
        whole = execution_cost(SM90, "cp_async", 16, 0, sofs, op, gofs, sizes).wavefronts
        fill = whole - (reference_rule(reading, gofs) if reading else 0)
        rows.append((f"{r['config']} v{variant}", reading, gofs, fill, int(r["wavefronts"])))
    return rows


def reference_rule(destinations: dict, sources: list) -> int:
    """sm_90's rule (docs/rules.md "Copies from their sources")."""
    return _from_sources(SM90.data, destinations, sources).wavefronts


def kept_lanes(destinations: dict) -> list[int]:
    """Lanes in order, less those whose destination a lower lane writes."""
    written, kept = set(), []
    for lane in sorted(destinations):
        if destinations[lane] not in written:
            written.add(destinations[lane])
            kept.append(lane)
    return kept


def requests(kept: list[int], destinations: dict, sources: list, how: str) -> dict[int, int]:
    """lane -> request: ``kth_chunk`` / ``kth_sector`` / ``kth_line`` / ``kth_chunk_row`` / ``kth_chunk_row_xor`` /
    ``kth_chunk_row_256_xor`` / ``kth_chunk_quarter_xor`` / ``kth_chunk_row_parity`` (the k-th lane to read it, into
    the row at the same chunk XOR mod 4, at a destination chunk of the same parity), ``last_...`` the same counted
    from the highest lane (``last_chunk_row_parity``: sm_90's since the repeated sources), ``split`` / ``split_line``
    / ``split_line_row`` (in lane order, a new request where a chunk repeats)."""
    out: dict[int, int] = {}
    if how.startswith(("kth", "last")):
        kth = how.replace("last_", "kth_")
        unit = 16 if kth.startswith("kth_chunk") else {"kth_sector": 32, "kth_line": 128}[kth]
        seen: dict = {}
        for lane in (reversed(kept) if how.startswith("last") else kept):
            c, p = sources[lane] // 16, destinations[lane] // 16
            scope = {"kth_chunk_row": p // 8, "kth_chunk_row_xor": (p // 8, (c ^ p) % 4),
                     "kth_chunk_row_256_xor": (p // 16, (c ^ p) % 4), "kth_chunk_quarter_xor": (lane // 8, (c ^ p) % 4),
                     "kth_chunk_row_parity": (p // 8, p % 2)}
            key = (sources[lane] // unit, scope.get(kth, 0))
            out[lane] = seen.get(key, 0)
            seen[key] = out[lane] + 1
        return out
    current: dict = {}
    chunks: dict = {}
    for lane in kept:
        scope = {"split": 0, "split_line": sources[lane] // 128,
                 "split_line_row": (sources[lane] // 128, destinations[lane] // 128)}[how]
        if sources[lane] // 16 in chunks.get(scope, set()):
            current[scope] = current.get(scope, 0) + 1
            chunks[scope] = set()
        chunks.setdefault(scope, set()).add(sources[lane] // 16)
        out[lane] = current.get(scope, 0)
    return out


def keyed(destinations: dict, sources: list, request_how: str, pairing: str):
    """[(lane, request, source chunk, destination chunk, paired)] of the kept lanes."""
    kept = kept_lanes(destinations)
    request = requests(kept, destinations, sources, request_how)
    placed = {(request[lane], sources[lane] // 16, destinations[lane] // 16) for lane in kept}
    out = []
    for lane in kept:
        q, c, p = request[lane], sources[lane] // 16, destinations[lane] // 16
        paired = {"sector": (q, c ^ 1, p ^ 1) in placed, "none": False,
                  "source": any(v[0] == q and v[1] == c ^ 1 for v in placed),
                  "destination": any(v[0] == q and v[2] == p ^ 1 for v in placed),
                  "any_request": any(v[1:] == (c ^ 1, p ^ 1) for v in placed),
                  "sector_or_source_half": (q, c ^ 1, p ^ 1) in placed or ("unpaired, source half", c % 2)}[pairing]
        out.append((lane, q, c, p, paired))
    return out


KEYS = {"xor4": lambda c, p: (c ^ p) % 4, "xor8": lambda c, p: (c ^ p) % 8, "xor2": lambda c, p: (c ^ p) % 2,
        "xor_high": lambda c, p: (c ^ p) % 4 // 2, "diff4": lambda c, p: (p - c) % 4, "diff8": lambda c, p: (p - c) % 8,
        "xor4_parity": lambda c, p: ((c ^ p) % 4, c % 2)}


def grouped_rule(request_how: str, line: int, row: int, key: str, pairing: str, by_request: bool = True):
    """Per (request, source line, destination row) group its distinct (key, paired)."""
    def count(destinations: dict, sources: list) -> int:
        groups: dict = {}
        for lane, q, c, p, paired in keyed(destinations, sources, request_how, pairing):
            group = (q if by_request else 0, sources[lane] // line, destinations[lane] // row)
            groups.setdefault(group, set()).add((KEYS[key](c, p), paired))
        return sum(len(keys) for keys in groups.values())
    return count


def open_wavefronts_rule(size: int, policy: str, backwards: bool, per_request: bool):
    """Lanes in order (or backwards), request by request: a lane whose (request, line, row, key, paired) is
    among the ``size`` wavefronts held open joins it, else opens one (evicting by ``policy``)."""
    def count(destinations: dict, sources: list) -> int:
        lanes = keyed(destinations, sources, "kth_chunk", "sector")
        total, held = 0, []
        for q in sorted({lane[1] for lane in lanes}):
            if per_request:
                held = []
            in_request = [lane for lane in lanes if lane[1] == q]
            for lane, _, c, p, paired in reversed(in_request) if backwards else in_request:
                key = (q, sources[lane] // 128, destinations[lane] // 128, (c ^ p) % 4, paired)
                if key in held:
                    if policy == "lru":
                        held.remove(key)
                        held.append(key)
                    continue
                total += 1
                held.append(key)
                if len(held) > size:
                    held.pop(0)
        return total
    return count


def candidates() -> dict[str, object]:
    out: dict[str, object] = {"sm_90 (docs/rules.md)": reference_rule}
    for how, line, row, key, pairing in itertools.product(
            ("kth_chunk", "kth_sector", "kth_chunk_row", "kth_chunk_row_xor", "kth_chunk_row_256_xor",
             "kth_chunk_quarter_xor", "kth_chunk_row_parity", "last_chunk_row_xor", "last_chunk_row_parity", "split",
             "split_line", "split_line_row"),
            (64, 128), (128, 256), KEYS,
            ("sector", "none", "source", "destination", "any_request", "sector_or_source_half")):
        out[f"requests {how}, groups line {line} row {row}, key {key}, pairing {pairing}"] = \
            grouped_rule(how, line, row, key, pairing)
    for key, pairing in itertools.product(KEYS, ("sector", "none", "sector_or_source_half")):
        out[f"no requests, key {key}, pairing {pairing}"] = grouped_rule("kth_chunk", 128, 128, key, pairing, False)
    for size, policy, backwards, per_request in itertools.product(range(1, 17), ("lru", "fifo"), (False, True),
                                                                  (True, False)):
        out[f"{size} open wavefronts, {policy}, {'backwards' if backwards else 'forwards'}, "
            f"{'per request' if per_request else 'warp-wide'}"] = \
            open_wavefronts_rule(size, policy, backwards, per_request)
    return out


def misses(rule, probes, ignore_src, later=(), most: int | None = None) -> dict[str, int]:
    """Row -> the candidate's wavefronts less the page's, where they differ: the probe rows, the ignore-src rows
    (left out, each counted a miss, where the probe rows alone miss more than ``most``), the ``later`` probe rows
    (the fitting group, the repeated sources)."""
    def probe_misses(rows):
        return {name: got - page for name, executions, ctas, page in rows
                if (got := ctas * sum(rule(d, s) for d, s in executions)) != page}

    out = probe_misses(probes)
    if most is not None and len(out) > most:
        out.update({name: 0 for name, *_ in ignore_src})
    else:
        for name, reading, sources, fill, page in ignore_src:
            got = (rule(reading, sources) if reading else 0) + fill
            if got != page:
                out[name] = got - page
    return {**out, **probe_misses(later)}


def fit_rows() -> list[tuple[str, list, int, int]]:
    """The fitting group's rows (tests/data/hw/ldgsts_probe/fit, ldgsts_probe.fit_configs)."""
    return probe_rows(ldgsts_probe.fit_configs, DATA / "ldgsts_probe" / "fit" / "manifest.csv", "fit_")


def repeat_rows() -> list[tuple[str, list, int, int]]:
    """The repeated sources' rows, both calls (tests/data/hw/ldgsts_probe/repeats, ldgsts_probe.repeat_configs and
    check_configs)."""
    manifest = DATA / "ldgsts_probe" / "repeats" / "manifest.csv"
    return [*probe_rows(ldgsts_probe.repeat_configs, manifest, "rep_"),
            *probe_rows(ldgsts_probe.check_configs, manifest, "chk_")]


def main(show_misses: bool, only: str) -> None:
    probes, ignore_src, fit, repeats = probe_rows(), ignore_src_rows(), fit_rows(), repeat_rows()
    old = len(probes) + len(ignore_src)
    baseline = misses(reference_rule, probes, ignore_src, fit + repeats)
    most = sum(1 for name, *_ in probes if name in baseline) + 10
    results = []
    for name, rule in candidates().items():
        if only in name:
            missed = misses(rule, probes, ignore_src, fit + repeats, most)
            results.append((len(missed), name, missed))
    results.sort(key=lambda r: r[0])
    print(f"{old} old rows: {len(probes)} guarded probe configurations, {len(ignore_src)} ignore-src rows; "
          f"{len(fit)} fitting-group rows; {len(repeats)} repeated-source rows")
    fitting, repeated = {name for name, *_ in fit}, {name for name, *_ in repeats}
    for count, name, missed in results[:25]:
        lost = sorted(set(missed) - set(baseline))
        new_missed, repeats_missed = len(fitting & set(missed)), len(repeated & set(missed))
        print(f"{old + len(fit) + len(repeats) - count:5d} fit (old {old - count + new_missed + repeats_missed}/{old}, "
              f"fitting group {len(fit) - new_missed}/{len(fit)}, repeats {len(repeats) - repeats_missed}/"
              f"{len(repeats)}), {len(lost):3d} lost against sm_90: {name}")
        if show_misses:
            print("      misses:", ", ".join(f"{row} {delta:+d}" for row, delta in sorted(missed.items())[:20]))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    main("--misses" in arguments, arguments[arguments.index("--only") + 1] if "--only" in arguments else "")
