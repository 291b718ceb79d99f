#!/usr/bin/env python3
"""Per family: how many measured launches traceconf gets exact, unresolved, or wrong, per SASS pc.

    python3 scripts/hw/compare_families.py [FAMILY...] [--json OUT.json]

Uses the comparison of tests/test_hw_families.py (default level, from the cubin that ran; wavefronts and
ideal per pc against the Source page).  A launch is *exact* when nothing is unresolved and every pc equals
the page, *unresolved* when some accesses are unresolved (with the reasons) and every resolved pc that the
page counts is right, *wrong* when some pc differs.  Prints one line per launch (seconds, status, reasons).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from test_hw_families import FAMILIES, comparison, manifest  # noqa: E402


def status(result: dict) -> tuple[str, list[str]]:
    wrong = [pc for pc in result["measured"] if result["predicted"].get(pc) != result["measured"][pc]]
    reasons = sorted({u["reason"] for u in result["unresolved"]})
    if result["unresolved"]:
        unresolved_pcs = {u.get("pc") for u in result["unresolved"]}
        wrong = [pc for pc in wrong if pc not in unresolved_pcs]
    if wrong and not result["unresolved"]:
        return "wrong", [f"{len(wrong)} pcs differ: " + ", ".join(
            f"{pc:#x} {result['texts'].get(pc, '')} {result['predicted'].get(pc)}!={result['measured'][pc]}"
            for pc in wrong[:4])]
    if result["unresolved"]:
        return "unresolved", reasons + ([f"{len(wrong)} pcs differ"] if wrong else [])
    return "exact", []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = {}
    for family in args.families:
        counts = Counter()
        for row in manifest(family):
            start = time.process_time()
            try:
                result = comparison(family, row["launch"])
                verdict, reasons = status(result)
                ideal_wrong = [pc for pc in result["measured_ideal"]
                               if result["predicted_ideal"].get(pc) != result["measured_ideal"][pc]]
            except Exception as error:  # noqa: BLE001 - a failing launch is a finding, not a stop
                verdict, reasons, ideal_wrong = "failed", [f"{type(error).__name__}: {error}"[:300]], []
            seconds = time.process_time() - start
            counts[verdict] += 1
            report[f"{family}/{row['launch']}"] = {"status": verdict, "reasons": reasons,
                                                  "ideal_pcs_differ": len(ideal_wrong), "cpu_s": round(seconds, 2)}
            print(f"{family}/{row['launch']}: {verdict} ({seconds:.1f} s) ideal-diff={len(ideal_wrong)} "
                  f"{' | '.join(reasons)[:600]}", flush=True)
        print(f"== {family}: {dict(counts)}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
