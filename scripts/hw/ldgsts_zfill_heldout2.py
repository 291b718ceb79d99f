#!/usr/bin/env python3
"""The second round of the LDGSTS fill-pass held-out probes (tests/data/hw/ldgsts_zfill_heldout2): the first
round's five families (ldgsts_zfill_heldout.py) at new seeds, 40 configurations each, and ``dup`` (60: five to
eight active lanes a quarter-warp, pairs and triples of them writing one destination, a zero fill one lane in
three), with traceconf's counts committed before the run.

    python3 scripts/hw/ldgsts_zfill_heldout2.py configs OUT.txt
    python3 scripts/hw/ldgsts_zfill_heldout2.py manifest SUMMARY OUT.csv
    python3 scripts/hw/ldgsts_zfill_heldout2.py predict OUT.csv
    python3 scripts/hw/ldgsts_zfill_heldout2.py mismatches MANIFEST PREDICTIONS OUT.csv

Collected with ``KERNEL=ldgsts_zfill_guard PARTS=2 scripts/hw/collect_ldgsts_tables.sh ldgsts_zfill_heldout2``.
"""

from __future__ import annotations

import ldgsts_zfill_heldout as first_round
from ldgsts_zfill_heldout import REPS, SECOND_ROUND, family, manifest

__all__ = ["REPS", "configs", "family", "manifest", "mismatches", "predictions", "tables"]

tables, configs, predictions, mismatches = first_round.bound(SECOND_ROUND)

if __name__ == "__main__":
    first_round.main(__doc__, SECOND_ROUND)
