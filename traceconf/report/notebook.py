"""Results in Jupyter: the per-instruction table as HTML, explain pictures inline as SVG.

:class:`ConflictTable` is the pandas DataFrame the API returns, with a
``_repr_html_`` that leads with what a kernel author looks for (launch,
totals, the instructions with the most excess wavefronts and their source
lines) and an :meth:`ConflictTable.explain` whose picture Jupyter draws.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable

import pandas as pd

#: Columns of the hotspot rows, in order.
HOTSPOT_COLUMNS = ["source", "text", "kind", "executions", "wavefronts", "ideal_wavefronts", "excess_wavefronts",
                   "max_ways"]


@dataclass
class SvgPicture:
    """An explain picture; Jupyter shows it inline, ``save`` writes it."""

    svg: str
    title: str

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path) -> None:
        from pathlib import Path
        Path(path).write_text(self.svg, encoding="utf-8")


def hotspots(frame: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The counted rows with the most excess wavefronts, then the most wavefronts."""
    counted = frame[frame["executions"] > 0]
    return counted.sort_values(["excess_wavefronts", "wavefronts"], ascending=False).head(top)


def hotspot_lines(frame: pd.DataFrame, top: int = 10) -> list[str]:
    """One plain-text line per hotspot row (failure messages, logs)."""
    out = []
    for row in hotspots(frame, top).itertuples():
        where = row.source if isinstance(row.source, str) and row.source else "(no line info)"
        out.append(f"{row.kernel} on {row.device}: {where}  {row.text}  {row.kind}  "
                   f"wavefronts {row.wavefronts:,}  ideal {row.ideal_wavefronts:,}  excess {row.excess_wavefronts:,}"
                   f"  {row.max_ways}-way")
    return out


class ConflictTable(pd.DataFrame):
    """Per-instruction results (the columns of ``traceconf.analyze_ptx``) that render for a notebook."""

    _metadata = ["explainer"]
    explainer: Callable[[int | None], SvgPicture] | None = None

    @property
    def _constructor(self):
        return ConflictTable

    def explain(self, instruction: int | None = None) -> SvgPicture:
        """The explain picture of ``instruction`` (default: the one with the most excess wavefronts)."""
        if self.explainer is None:
            raise ValueError("these results carry no emulation to explain (analyse again through traceconf.triton)")
        return self.explainer(instruction)

    def _repr_html_(self) -> str:
        parts = []
        facts = self.attrs.get("launch") or {}
        if facts:
            parts.append("<p><b>" + html.escape(str(facts.get("kernel", ""))) + "</b> " + html.escape(
                ", ".join(f"{key} {value}" for key, value in facts.items() if key not in ("kernel", "signature")))
                + "</p>")
        if len(self):
            totals = self.groupby(["kernel", "device"])[["wavefronts", "ideal_wavefronts", "excess_wavefronts"]].sum()
            parts.append(totals.to_html())
            parts.append(pd.DataFrame(hotspots(self)[["instruction", *HOTSPOT_COLUMNS]]).to_html(index=False))
        for message in self.attrs.get("failures") or []:
            parts.append(f"<p>failed: {html.escape(message)}</p>")
        return "\n".join(parts) or "<p>no shared-memory instructions</p>"
