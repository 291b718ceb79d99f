"""The shared-memory access kinds every stage names, in the order of their integer codes."""

from __future__ import annotations

#: Access kinds, in the order of their integer codes (see ``KIND_CODES``).
KINDS = ("ld", "st", "atom", "ldmatrix", "stmatrix", "cp_async")
KIND_CODES = {kind: code for code, kind in enumerate(KINDS)}
