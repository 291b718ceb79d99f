"""``traceconf devices``: the builtin rule sets, one line each, or one rule set in full."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from traceconf.rules import RuleSet, list_rule_sets, load_rule_set


def _details(rules: RuleSet) -> str:
    """Every rule of one rule set, in the words of docs/rules.md."""
    lines = [f"{rules.name}: {rules.vendor} {rules.title}",
             f"  evidence      {rules.evidence}" + (f" (alias of {rules.alias_of})" if rules.alias_of else ""),
             f"  products      {', '.join(rules.products) or '-'} (also accepted as --device)",
             f"  source        {rules.source}",
             f"  banks         {rules.banks} x {rules.bank_bytes} B, distinct {rules.row_bytes}-byte rows "
             "in one bank serialize",
             f"  warp          {rules.warp_size} lanes",
             f"  broadcast     {rules.broadcast}" + ("" if rules.merge_stores else "; same-address writes conflict")
             + ("; every lane of " + "/".join(sorted(rules.unmerged_kinds)) + " on one word costs its own pass"
                if rules.unmerged_kinds else ""),
             f"  split         accesses wider than {rules.split_bytes} B become separate requests",
             "  ideal         " + ("the wavefronts the active lanes' bytes fill, at most those taken"
                                  if rules.ideal == "bytes" else "one wavefront per active lane group")]
    for rule in rules.lane_groups:
        kinds = "/".join(sorted(rule.kinds)) if rule.kinds else "ld/st/atom/cp_async"
        sizes = ", ".join(str(w) for w in sorted(rule.bytes))
        contiguous = all(g == tuple(range(g[0], g[0] + len(g))) for g in rule.groups)
        count = f"{len(rule.groups)} group{'s' if len(rule.groups) > 1 else ''}"
        layout = (f"{count} of {len(rule.groups[0])} consecutive lanes" if contiguous else
                  "groups " + " ".join("{" + ",".join(map(str, g)) + "}" for g in rule.groups))
        extra = f", +{rule.extra_wavefronts} wavefront per active group" if rule.extra_wavefronts else ""
        lines.append(f"  {sizes} B ({kinds}): {layout}{extra}")
    if rules.pairing:
        p = rules.pairing
        lines.append(f"  pairing       {'/'.join(sorted(p.kinds))} >= {p.min_bytes} B: lanes n and n^"
                     f"{' or n^'.join(map(str, p.partners))} agree for all active lanes -> groups merge x{p.factor}")
    if rules.matrix:
        m = rules.matrix
        lines.append(f"  matrix        {'/'.join(sorted(m.kinds))}: one group per matrix, {m.lanes} lanes x "
                     f"{m.row_bytes}-byte rows")
    for op, rule in sorted(rules.ops.items()):
        lines.append(f"  op {op:<12} " + _op_text(rule))
    if rules.notes:
        lines.append("  notes         " + " ".join(rules.notes.split()))
    return "\n".join(lines)


def _op_text(rule) -> str:
    """One operation rule (``[atomic_ops.OP]``, ``[copy_ops.OP]``) in words."""
    parts = []
    if rule.merge_same_word is not None:
        parts.append("same-word lanes " + ("merge" if rule.merge_same_word else "each cost a pass"))
    if rule.group_passes == "placements":
        parts.append("a group's passes are its distinct (row, chunk XOR lane position) destinations")
    if rule.group_passes == "one":
        parts.append("an active group takes one pass (a conflict-free subset served, the rest retry)")
    if rule.plus_plain:
        parts.append("plus the access as the kind without this operation")
    if rule.passes > 1:
        parts.append(f"served {rule.passes} times")
    return "; ".join(parts) or "as its kind"


def devices(name: Annotated[Optional[str], typer.Argument(
        help="Show every rule of this rule set (a builtin name or a .toml path).")] = None) -> None:
    """List the device rule sets: name, vendor/title, banks x bytes, warp size, evidence."""
    if name is not None:
        typer.echo(_details(load_rule_set(name)))
        return
    for rules in list_rule_sets():
        typer.echo(rules.describe())


def register(app: typer.Typer) -> None:
    app.command("devices")(devices)
