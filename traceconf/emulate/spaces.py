"""The state space a PTX memory instruction names (one reader for the emulator's memory, region and driver
modules)."""

from __future__ import annotations

SPACES = ("shared", "global", "local", "param", "const", "tex", "surf")


def space_of(row: dict) -> str:
    """State space named by the instruction ('generic' when none is)."""
    for modifier in row["modifiers"] or []:
        root = modifier.split("::")[0]
        if root in SPACES:
            return root
    space = row.get("state_space")
    return space if space and space != "generic" else "generic"
