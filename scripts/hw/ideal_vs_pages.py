#!/usr/bin/env python3
"""Ideal wavefronts per SASS pc against every committed H100 Source page: how many pcs differ.

    python3 scripts/hw/ideal_vs_pages.py [--families]

Run from a checkout's root (its tests/ helpers and data are used; ``PYTHONPATH`` chooses the traceconf that
predicts, so the same command measures another tree: ``cd OTHER && PYTHONPATH=$PWD python3 THIS``).  Pages:
the static launches of tests/data/hw/source_sm90 and the Triton fixtures' pages (tests/test_sass_hw.py), the scale and follow-up pages of
tests/data/hw/scale (tests/test_scale_hw.py) and, with ``--families``, the six families of
tests/test_hw_families.py (a few CPU-minutes).  A pc counts when the page or the prediction has an ideal; a
launch with unresolved accesses is listed apart (its ideal is not compared).  Prints the differing pcs and
one total line per page set.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path.cwd()
sys.path.insert(0, str(REPO / "tests"))


def _compare(label: str, predicted: dict[int, int], measured: dict[int, int], texts: dict) -> tuple[int, int]:
    pcs = {pc for pc in set(predicted) | set(measured) if predicted.get(pc) or measured.get(pc)}
    differ = sorted(pc for pc in pcs if predicted.get(pc, 0) != measured.get(pc, 0))
    for pc in differ:
        print(f"  {label} {pc:#x} {texts.get(pc, '').strip()[:48]}: predicted {predicted.get(pc, 0)}, "
              f"page {measured.get(pc, 0)}")
    return len(pcs), len(differ)


def static_pages() -> tuple[int, int, list[str]]:
    import test_sass_hw as hw
    pcs = differ = 0
    for launch in tomllib.load(open(hw.CUDA / "kernels.toml", "rb"))["launch"]:
        if not launch["static_addresses"]:
            continue
        _, _, results, rows = hw._predict(launch["id"])
        ideal = Counter()
        for row in results:
            ideal[rows[row["instruction"]]["pc"]] += row["ideal_wavefronts"]
        page = hw._source_page(launch["id"], "L1 Wavefronts Shared Ideal")
        n, d = _compare(launch["id"], ideal, {pc: n for pc, (_, n) in page.items()},
                        {pc: text for pc, (text, _) in page.items()})
        pcs, differ = pcs + n, differ + d
    return pcs, differ, []


def triton_pages() -> tuple[int, int, list[str]]:
    import test_sass_hw as hw
    pcs = differ = 0
    for case in hw._triton_cases():
        spec = case.values[0]
        analysis = hw._triton_analysis(spec["id"])
        pc_of = {row["instruction"]: row["pc"] for row in analysis.instructions.to_pylist()}
        ideal = Counter()
        for row in analysis.results.to_pylist():
            ideal[pc_of[row["instruction"]]] += row["ideal_wavefronts"]
        page = hw._source_page(f"triton_{spec['id']}", "L1 Wavefronts Shared Ideal")
        # HGMMA reads shared memory through matrix descriptors (no per-lane addresses): not predicted
        measured = {pc: n for pc, (text, n) in page.items() if "GMMA" not in text}
        n, d = _compare(spec["id"], ideal, measured, {pc: text for pc, (text, _) in page.items()})
        pcs, differ = pcs + n, differ + d
    return pcs, differ, []


def scale_pages() -> tuple[int, int, list[str]]:
    import test_scale_hw as scale
    pcs = differ = 0
    unresolved = []
    for launch in scale.LAUNCHES + scale.FOLLOWUP:
        if scale.analysis_of(launch["id"]).unresolved:
            unresolved.append(launch["id"])
            continue
        predicted, measured = scale._per_pc(launch["id"], "L1 Wavefronts Shared Ideal", "ideal_wavefronts")
        n, d = _compare(launch["id"], predicted, measured, {})
        pcs, differ = pcs + n, differ + d
    return pcs, differ, unresolved


def family_pages() -> tuple[int, int, list[str]]:
    import test_hw_families as families
    pcs = differ = 0
    unresolved = []
    for family in families.FAMILIES:
        for row in families.manifest(family):
            result = families.comparison(family, row["launch"])
            if result["unresolved"]:
                unresolved.append(f"{family}/{row['launch']}")
                continue
            n, d = _compare(f"{family}/{row['launch']}", result["predicted_ideal"], result["measured_ideal"],
                            result["texts"])
            pcs, differ = pcs + n, differ + d
    return pcs, differ, unresolved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", action="store_true", help="also the six families (a few CPU-minutes)")
    args = parser.parse_args()
    sets = [("static (source_sm90)", static_pages), ("Triton fixtures (triton_sm90)", triton_pages),
            ("scale + follow-up", scale_pages)]
    if args.families:
        sets.append(("families", family_pages))
    for name, run in sets:
        pcs, differ, unresolved = run()
        print(f"{name}: {differ} of {pcs} pcs differ" +
              (f"; {len(unresolved)} launches unresolved, not compared: {', '.join(unresolved)}" if unresolved
               else ""), flush=True)


if __name__ == "__main__":
    main()
