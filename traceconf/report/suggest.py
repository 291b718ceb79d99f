"""The suggestions of :mod:`traceconf.analyses.suggest`, printed: headline and before/after per hotspot."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceconf.names import short_name
from traceconf.pipeline import KernelAnalysis
from traceconf.analyses.suggest import Suggestion, declaration


def render_suggestions(analysis: KernelAnalysis, device: str, found: list[tuple[int, Suggestion | None]],
                       console: Console) -> None:
    """Suggestions for one kernel's hotspots on ``device``, each with the per-instruction before/after."""
    info = analysis.instructions.to_pylist()
    text_of = {int(r["instruction"]): (r["text"], r["ptx_line"]) for r in info}
    places = {int(r["instruction"]): (r.get("source_file"), r.get("source_line")) for r in info}
    console.print(Text(f"\nsuggestions for {short_name(analysis.kernel)} on {device}", style="bold"))
    if not found:
        console.print("  no bank conflicts: nothing to suggest")
        return
    done: set[tuple[str, int]] = set()
    for instruction, suggestion in found:
        text = _name(instruction, text_of)
        where = f"[{instruction}] "
        if suggestion is None:
            console.print(f"  {where}{text}: no per-lane addresses or row pattern to work with")
            continue
        key = (suggestion.variable.name, suggestion.best.label if suggestion.best else "")
        if key in done:
            console.print(f"  {where}{text}: {suggestion.headline()} (same change as above)")
            continue
        done.add(key)
        console.print(Text(f"  {where}{text}: ", style="bold").append(
            suggestion.headline(), style="green" if suggestion.best else "yellow"))
        source_file, source_line = places.get(instruction, (None, None))
        known = suggestion.variable.name if suggestion.variable.bytes is not None else None
        edit = declaration(source_file, source_line, analysis.input_path, known)
        if edit is not None:
            console.print(Text(f"    declaration to edit: {Path(source_file).name}:{edit[0]} {edit[1]}"))
        if suggestion.best is not None:
            worse = suggestion.regressions()
            if worse:
                console.print(f"    but it makes {len(worse)} other instruction(s) slower: "
                              + ", ".join(_name(i, text_of) for i in worse), style="yellow")
            console.print(_before_after(suggestion, text_of))


def _name(ident: int, text_of: dict) -> str:
    text, line = text_of.get(ident, ("", None))
    text = " ".join(text.split())
    return f"L{line} {text}" if line is not None else f"[{ident}] {text}".rstrip()


def _before_after(suggestion: Suggestion, text_of: dict) -> Table:
    table = Table(box=None, pad_edge=False, show_header=True, header_style="dim")
    for name in ("instruction", "wavefronts now", "after", "ways now", "after"):
        table.add_column(name, justify="left" if name == "instruction" else "right", no_wrap=True,
                         overflow="ellipsis", max_width=64 if name == "instruction" else None)
    for ident in sorted(suggestion.baseline.per_instruction):
        before = suggestion.baseline.per_instruction[ident]
        after = suggestion.best.per_instruction[ident]
        style = "red" if after[0] > before[0] else ("green" if after[0] < before[0] else "")
        table.add_row(f"    {_name(ident, text_of)}", f"{before[0]:,}",
                      Text(f"{after[0]:,}", style=style), f"{before[1]}-way", Text(f"{after[1]}-way", style=style))
    table.add_row(f"    all accesses to {suggestion.variable.name}", f"{suggestion.baseline.wavefronts:,}",
                  f"{suggestion.best.wavefronts:,}", "", "", style="bold")
    return table
