#!/usr/bin/env python3
"""The third round of the LDGSTS fill-pass held-out probes (tests/data/hw/ldgsts_zfill_heldout3): the second round's
six families (ldgsts_zfill_heldout.py's THIRD_ROUND: full__alike, full__own, part, lines, swz and dup) at new seeds,
35 configurations each, with traceconf's counts under the fill-pass rule as amended on the duplicate-destination
probes committed before the run.

    python3 scripts/hw/ldgsts_zfill_heldout3.py configs OUT.txt
    python3 scripts/hw/ldgsts_zfill_heldout3.py manifest SUMMARY OUT.csv
    python3 scripts/hw/ldgsts_zfill_heldout3.py predict OUT.csv
    python3 scripts/hw/ldgsts_zfill_heldout3.py mismatches MANIFEST PREDICTIONS OUT.csv

Collected with ``KERNEL=ldgsts_zfill_guard PARTS=2 scripts/hw/collect_ldgsts_tables.sh ldgsts_zfill_heldout3``.
"""

from __future__ import annotations

import ldgsts_zfill_heldout as first_round
from ldgsts_zfill_heldout import REPS, THIRD_ROUND, family, manifest

__all__ = ["REPS", "configs", "family", "manifest", "mismatches", "predictions", "tables"]

tables, configs, predictions, mismatches = first_round.bound(THIRD_ROUND)

if __name__ == "__main__":
    first_round.main(__doc__, THIRD_ROUND)
