"""Find the next occurrence of any of a few needles, scanning the text once.

``str.find`` jumps to a rare character or keyword far faster than a regex that
stops at every candidate position; remembering where each needle occurs next
keeps the whole scan linear even when the caller skips ahead.
"""

from __future__ import annotations


class NextOf:
    """``after(position)``: the smallest position >= ``position`` where any needle starts, or -1."""

    def __init__(self, text: str, needles) -> None:
        self.text = text
        self.upcoming = {needle: text.find(needle) for needle in needles}

    def after(self, position: int) -> int:
        upcoming, text = self.upcoming, self.text
        for needle, found in upcoming.items():
            if 0 <= found < position:
                upcoming[needle] = text.find(needle, position)
        candidates = [found for found in upcoming.values() if found >= 0]
        return min(candidates) if candidates else -1
