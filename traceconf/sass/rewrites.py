"""Why the SASS-level prediction differs from the PTX-level one: what ptxas did to the shared accesses.

Shared accesses are matched by their address arithmetic: PTX ``ld.shared.f32 [%r7+4]`` and SASS ``LDS.128 [R16+0x10]`` are
(base, offset, width) triples.  A group of SASS accesses of one kind, CUDA
source line and base (``R16``: offsets 0x0, 0x10, ... 16 bytes each)
matches the PTX accesses on one base (``%r7``: offsets 0, 4, 8, ... 4 bytes
each) under the one shift that tiles every SASS access exactly with PTX
accesses: four ``ld.shared.f32`` of ``As[ty][k..k+3]`` inside one
``LDS.128`` are a fusion.  What address matching leaves over is matched
through the PTX line ptxas names for each SASS instruction
(``nvdisasm -gp``) or, failing that, to the nearest SASS access of the same
kind and source line with room for it; a PTX access left with none was
removed (a redundant access).  The result is one line per fused or split SASS
instruction, plus one per removed PTX access.
"""

from __future__ import annotations

from traceconf.ptx.opcodes import shared_access_kind
from traceconf.sass.opcodes import ALWAYS, shared_op


def _sass_kind(row: dict):
    op = shared_op(".".join([row["opcode"], *(row["modifiers"] or [])]))
    if op is None or (op.space != ALWAYS and op.kind != "cp_async"):
        return None
    return op


def _ptx_name(row: dict) -> str:
    return ".".join([row["opcode"], *(row["modifiers"] or [])])


def _lines(numbers: list[int]) -> str:
    numbers = sorted(numbers)
    if len(numbers) == 1:
        return f"PTX line {numbers[0]}"
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"PTX lines {numbers[0]}–{numbers[-1]}"
    return "PTX lines " + ", ".join(str(n) for n in numbers)


def _source(rows: list[dict]) -> str:
    places = sorted({(r["source_file"], r["source_line"]) for r in rows if r.get("source_file")})
    return ", ".join(f"{file.rsplit('/', 1)[-1]}:{line}" for file, line in places)


def _base_offset_of_ptx(row: dict) -> tuple[str, int] | None:
    for operand in row["operands"] or []:
        if operand["kind"] == "address":
            return (operand.get("name") or ""), int(operand.get("value") or 0)
    return None


def _base_offset_of_sass(row: dict) -> tuple[str, int] | None:
    from traceconf.sass.operands import parse_operand
    for text in row["operands"] or []:
        operand = parse_operand(text)
        if operand.kind == "address":
            return "+".join(f"{name}x{scale}" for name, scale, _ in operand.registers), operand.value
    return None


def _tile(sass_group: list[tuple[int, int, int]], ptx_group: list[tuple[int, int, dict]], taken: set[int]):
    """Shift and assignment under which every SASS access [o, o+w) is exactly covered by untaken PTX accesses."""
    lowest = min(o for o, _, _ in sass_group)
    for shift in sorted({offset - lowest for offset, _, row in ptx_group if row["ptx_line"] not in taken}):
        assignment = {}
        for offset, width, ident in sass_group:
            inside = [row for o, w, row in ptx_group if row["ptx_line"] not in taken
                      and offset + shift <= o and o + w <= offset + shift + width]
            if sum(r["access_bytes"] or 0 for r in inside) != width:
                break
            assignment[ident] = inside
        else:
            return assignment
    return None


def ptxas_rewrites(sass_rows: list[dict], ptx_rows: list[dict]) -> tuple[dict[int, str], list[str]]:
    """(SASS instruction id → one-line explanation, notes on removed PTX accesses) for one kernel."""
    ptx_shared = {row["ptx_line"]: row for row in ptx_rows if shared_access_kind(row["opcode"], row["state_space"], row["modifiers"])}
    sass_shared = [(row, op) for row in sass_rows if (op := _sass_kind(row)) is not None]
    if not ptx_shared or not sass_shared:
        return {}, []
    groups: dict[int, list[dict]] = {row["instruction"]: [] for row, _ in sass_shared}
    taken: set[int] = set()

    def statement(row):
        return row.get("source_file"), row.get("source_line")

    # 1. address arithmetic: SASS base groups tiled by PTX base groups of the same kind and statement
    sass_groups: dict[tuple, list] = {}
    for row, op in sass_shared:
        place = _base_offset_of_sass(row)
        if place is not None and row.get("source_line") is not None:
            sass_groups.setdefault((op.kind, statement(row), place[0]), []).append((place[1], op.bytes,
                                                                                  row["instruction"]))
    ptx_groups: dict[tuple, list] = {}
    for row in ptx_shared.values():
        place = _base_offset_of_ptx(row)
        if place is not None:
            # one PTX base may serve several statements (s[2*i] = a; s[2*i+1] = b; fused into one STS.64)
            ptx_groups.setdefault((shared_access_kind(row["opcode"], row["state_space"], row["modifiers"]), place[0]), []).append(
                (place[1], row["access_bytes"] or 0, row))
    for (kind, where, _), members in sorted(sass_groups.items(), key=lambda item: -len(item[1])):
        # PTX groups holding an access of this statement first, then the others of the same kind
        ordered = sorted(ptx_groups.items(), key=lambda item: not any(statement(r) == where for *_, r in item[1]))
        for (ptx_kind, _), candidates in ordered:
            if ptx_kind != kind:
                continue
            assignment = _tile(members, candidates, taken)
            if assignment:
                for ident, rows in assignment.items():
                    groups[ident] = rows
                    taken.update(r["ptx_line"] for r in rows)
                break
    # 2. what is left: the PTX line ptxas names, else the nearest access of the same kind and statement
    for row, op in sass_shared:
        anchor = ptx_shared.get(row.get("ptx_line"))
        if not groups[row["instruction"]] and anchor is not None and anchor["ptx_line"] not in taken:
            groups[row["instruction"]] = [anchor]
            taken.add(anchor["ptx_line"])
    claimed: dict[int, list[int]] = {}
    for row, op in sass_shared:
        anchor = ptx_shared.get(row.get("ptx_line"))
        if not groups[row["instruction"]] and anchor is not None:
            claimed.setdefault(anchor["ptx_line"], []).append(row["instruction"])
    removed = []
    for line, ptx in sorted(ptx_shared.items()):
        if line in taken:
            continue
        kind = shared_access_kind(ptx["opcode"], ptx["state_space"], ptx["modifiers"])
        candidates = [(abs((row.get("ptx_line") or 0) - line), row["instruction"]) for row, op in sass_shared
                      if op.kind == kind and statement(row) == statement(ptx)
                      and sum(r["access_bytes"] or 0 for r in groups[row["instruction"]]) + (ptx["access_bytes"] or 0)
                      <= op.bytes]
        if candidates:
            groups[min(candidates)[1]].append(ptx)
        else:
            removed.append(ptx)
    explanations: dict[int, str] = {}
    texts = {row["instruction"]: row for row, _ in sass_shared}
    for ident, members in groups.items():
        sass = texts[ident]
        sass_name = ".".join([sass["opcode"], *(sass["modifiers"] or [])])
        if len(members) > 1:
            names = sorted({_ptx_name(r) for r in members})
            what = f"{len(members)} {names[0]}" if len(names) == 1 else f"{len(members)} accesses ({', '.join(names)})"
            where = ", ".join(p for p in (_lines([r["ptx_line"] for r in members]), _source(members)) if p)
            explanations[ident] = f"ptxas fused {what} ({where}) into {sass_name}"
    for line, idents in claimed.items():
        ptx = ptx_shared[line]
        owners = [i for i, members in groups.items() if any(r["ptx_line"] == line for r in members)]
        parts = idents + owners
        if len(parts) > 1:
            names = sorted({".".join([texts[i]["opcode"], *(texts[i]["modifiers"] or [])]) for i in parts})
            for ident in parts:
                explanations.setdefault(ident, f"ptxas split {_ptx_name(ptx)} (PTX line {line}"
                                        f"{', ' + _source([ptx]) if _source([ptx]) else ''}) into {len(parts)} "
                                        f"{'/'.join(names)}")
    notes = [f"ptxas removed {_ptx_name(p)} ({_lines([p['ptx_line']])}{', ' + _source([p]) if _source([p]) else ''}):"
             f" no SASS shared access of its kind and source line is left (a redundant access)" for p in removed]
    return explanations, notes
