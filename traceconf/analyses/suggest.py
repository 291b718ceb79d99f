"""What-if layouts for the worst hotspots: row padding and XOR swizzles, re-counted by the engine.

For a hotspot the suggestion works on addresses only:

1. the shared variable is the one of the emulation's ``shared_layout`` whose
   byte range holds the hotspot's addresses (traces without a layout: the whole
   window, base 0);
2. candidate row lengths come from the address pattern across lanes: the most
   common byte distance between consecutive active lanes (a column walk of a
   32×32 float tile has 128 B between lanes → rows of 32 words);
3. every access of EVERY instruction that touches the variable is rewritten
   (pad: ``base + row·(R + pad) + col``; swizzle: the word or 16-byte chunk
   index XOR-ed with the row index), and the engine counts them again, so a pad
   that fixes the loads but breaks the stores shows it;
4. the change with the fewest wavefronts over the variable's instructions wins.

Padding keeps every access aligned to its own width (vector and ldmatrix rows
need 16-byte alignment), so pads are multiples of the widest access.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.names import function_name
from traceconf.pipeline import KernelAnalysis
from traceconf.sources import resolve_source, source_lines

MAX_ROW_CANDIDATES = 2
PAD_MULTIPLES = (1, 2)
SWIZZLE_CHUNKS = (4, 16)


@dataclass
class Variable:
    name: str
    base: int
    bytes: int | None        # None: the whole window (no layout known)


@dataclass
class Outcome:
    """Wavefronts of one layout, per instruction touching the variable."""

    label: str
    per_instruction: dict[int, tuple[int, int]]   # instruction → (wavefronts, max_ways)

    @property
    def wavefronts(self) -> int:
        return sum(w for w, _ in self.per_instruction.values())


@dataclass
class Suggestion:
    instruction: int
    variable: Variable
    row_bytes: int
    baseline: Outcome
    best: Outcome | None      # None: no candidate beats the current layout

    def regressions(self) -> list[int]:
        """Instructions the best change makes worse (e.g. a pad that fixes loads but breaks stores)."""
        if self.best is None:
            return []
        return [i for i, (w, _) in self.best.per_instruction.items() if w > self.baseline.per_instruction[i][0]]

    def headline(self) -> str:
        if self.best is None:
            return f"no padding or swizzle of {self.variable.name} helps"
        before = self.baseline.per_instruction[self.instruction]
        after = self.best.per_instruction[self.instruction]
        if after == (0, 0) and before[0]:
            return f"{self.best.label}: merged into a vector access"
        return f"{self.best.label}: {before[1]}-way → {after[1]}-way"


def variable_of(analysis: KernelAnalysis, address: np.ndarray) -> Variable:
    """The shared variable whose range holds most of ``address`` (active lanes only)."""
    active = address[address != INACTIVE]
    best, hits = None, 0
    for variable in analysis.shared_layout:
        start, size = int(variable["offset"]), int(variable["bytes"])
        inside = int(np.count_nonzero((active >= start) & (active < start + size)))
        if inside > hits:
            best, hits = Variable(function_name(variable["name"]), start, size), inside
    return best or Variable("shared memory", 0, None)


def row_candidates(address: np.ndarray, access_bytes: int, row_unit: int) -> list[int]:
    """Most common distances between consecutive active lanes that can be a row length, most common first."""
    left, right = address[:, :-1], address[:, 1:]
    valid = (left != INACTIVE) & (right != INACTIVE)
    distance = np.abs(right - left)[valid]
    distance = distance[(distance > access_bytes) & (distance % row_unit == 0)]
    if not len(distance):
        return []
    values, counts = np.unique(distance, return_counts=True)
    return values[np.argsort(-counts, kind="stable")][:MAX_ROW_CANDIDATES].tolist()


#: Bytes of the element types a ``__shared__`` tile is commonly declared with.
ELEMENT_BYTES = {"char": 1, "int8_t": 1, "uint8_t": 1, "short": 2, "half": 2, "__half": 2, "__nv_bfloat16": 2,
                 "bf16": 2, "int": 4, "unsigned": 4, "float": 4, "int32_t": 4, "uint32_t": 4, "half2": 4,
                 "__half2": 4, "double": 8, "long": 8, "int64_t": 8, "uint64_t": 8, "float2": 8, "int2": 8,
                 "float4": 16, "int4": 16, "uint4": 16, "double2": 16}
_CONSTANT = re.compile(r"^\s*(?:#define\s+(\w+)\s+\(?\s*(\d+)\s*\)?\s*$|(?:static\s+)?(?:constexpr|const)\s+"
                       r"(?:unsigned\s+|signed\s+)?(?:int|long|size_t|auto|uint32_t|int32_t)\s+(\w+)\s*=\s*(\d+)\s*;)",
                       re.MULTILINE)


def _evaluate(expression: str, constants: dict[str, int]) -> int | None:
    """An integer array extent such as ``TILE_DIM + 1`` (literals, named constants, + - * /), else None."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return None

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)):
            left, right = value(node.left), value(node.right)
            if left is None or right is None or (isinstance(node.op, (ast.Div, ast.FloorDiv)) and not right):
                return None
            return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}.get(
                type(node.op), left // right if right else None)
        return None
    return value(tree.body)


#: A ``__shared__`` tile declaration (2-D or more): the element type words, the name, the extents.
_SHARED_TILE = r"__shared__([^;]*?)\b{name}\s*((?:\[[^\]]*\]\s*){{2,}})"


def _declarations(source_file: str | None, source_line: int | None, input_path: str, name: str | None):
    """(file text, match of the last ``__shared__`` declaration of ``name`` above ``source_line``) or None.
    Without a ``name`` (no shared layout: the SASS level, traces), the one tile the line's own text indexes."""
    if not source_file or not source_line:
        return None
    path = resolve_source(source_file, input_path)
    lines = source_lines(path) if path is not None else ()
    if not lines:
        return None
    text = "\n".join(lines)
    before = "\n".join(lines[:source_line])
    if name is None:
        used = lines[source_line - 1] if source_line <= len(lines) else ""
        names = {m.group(2) for m in re.finditer(_SHARED_TILE.format(name=r"(\w+)"), before)}
        indexed = [n for n in sorted(names) if re.search(r"\b" + re.escape(n) + r"\s*\[", used)]
        if len(indexed) != 1:
            return None
        name = indexed[0]
    found = list(re.finditer(_SHARED_TILE.format(name=re.escape(name)), before))
    return (text, found[-1]) if found else None


#: A one-dimensional ``__shared__`` array (``extern __shared__ int sdata[];`` too): no row to pad.
_SHARED_ARRAY = r"__shared__[^;]*?\b(\w+)\s*\[[^\]]*\]\s*[;=,]"


def flat_array(source_file: str | None, source_line: int | None, input_path: str) -> str | None:
    """The one-dimensional ``__shared__`` array the access's source line indexes, when it indexes only such
    arrays (None otherwise): a pad or swizzle of a "row" there is not what a programmer can write; the index
    is the fix."""
    path = resolve_source(source_file, input_path) if source_file and source_line else None
    lines = source_lines(path) if path is not None else ()
    if not lines or source_line > len(lines):
        return None
    above = "\n".join(lines[:source_line])
    flat = set(re.findall(_SHARED_ARRAY, above))
    tiles = {m.group(2) for m in re.finditer(_SHARED_TILE.format(name=r"(\w+)"), above)}
    line = lines[source_line - 1]
    used = sorted(name for name in flat | tiles if re.search(r"\b" + re.escape(name) + r"\s*\[", line))
    return used[0] if used and set(used) <= flat - tiles else None


def sequential_outcome(scope: WarpAccesses, weights: np.ndarray, variable: Variable, array: str,
                       rules) -> Outcome | None:
    """Every access of the array whose consecutive active lanes are more than one element apart, re-addressed
    so that they are consecutive (the lowest address first, then one element per active lane): what an
    index rewrite such as a reduction's sequential addressing gives.  None when no access is strided."""
    address = scope.address.copy()
    active = address != INACTIVE
    steps = np.where(active[:, 1:] & active[:, :-1], np.abs(address[:, 1:] - address[:, :-1]), 0)
    strided = (steps.max(axis=1, initial=0) > scope.bytes) & _inside(address, variable).any(axis=1)
    if not strided.any():
        return None
    rank = np.cumsum(active, axis=1) - 1
    base = np.where(active, address, np.iinfo(np.int64).max).min(axis=1)
    compact = base[:, None] + rank * scope.bytes[:, None].astype(np.int64)
    address[strided] = np.where(active, compact, INACTIVE)[strided]
    label = (f"index rewrite: {array} is one-dimensional, so no pad applies; give consecutive active threads "
             "consecutive elements (a reduction's sequential addressing: s from blockDim.x / 2 down to 1, each "
             "thread tid < s adding element tid + s into element tid)")
    return Outcome(label, _count(scope, address, rules, weights))


def declaration(source_file: str | None, source_line: int | None, input_path: str, name: str | None
                ) -> tuple[int, str] | None:
    """(line, text) of the ``__shared__`` declaration of ``name`` that the access at ``source_line`` uses: the
    declaration a suggested pad or swizzle edits; None when the source is unreadable or declares no such tile.
    ``name`` None: the one tile the access's line indexes (None when it indexes none or several)."""
    found = _declarations(source_file, source_line, input_path, name)
    if found is None:
        return None
    text, match = found
    line = text.count("\n", 0, match.start()) + 1
    return line, text.splitlines()[line - 1].strip()


def declared_row(source_file: str | None, source_line: int | None, input_path: str, name: str
                 ) -> tuple[int, str] | None:
    """(row bytes, ``name[..][EXTENT]``) of the last ``__shared__`` declaration of ``name`` above
    ``source_line`` in the CUDA source (the tile's own row, as written), or None when unreadable."""
    found = _declarations(source_file, source_line, input_path, name)
    if found is None:
        return None
    text, declaration = found
    element = [w for w in re.findall(r"\w+", declaration.group(1)) if w in ELEMENT_BYTES]
    extents = re.findall(r"\[([^\]]*)\]", declaration.group(2))
    constants = {m.group(1) or m.group(3): int(m.group(2) or m.group(4)) for m in _CONSTANT.finditer(text)}
    extent = _evaluate(extents[-1], constants)
    if not element or not extent or extent < 1:
        return None
    return extent * ELEMENT_BYTES[element[-1]], f"{name}[…][{extents[-1].strip()}]"


def _inside(address: np.ndarray, variable: Variable) -> np.ndarray:
    active = address != INACTIVE
    if variable.bytes is None:
        return active
    return active & (address >= variable.base) & (address < variable.base + variable.bytes)


def pad(address: np.ndarray, mask: np.ndarray, variable: Variable, row: int, extra: int) -> np.ndarray:
    offset = address - variable.base
    out = address.copy()
    out[mask] = variable.base + (offset[mask] // row) * (row + extra) + offset[mask] % row
    return out


def swizzle(address: np.ndarray, mask: np.ndarray, variable: Variable, row: int, chunk: int) -> np.ndarray:
    """XOR the ``chunk``-byte index inside a row with the row index (modulo the chunks per row)."""
    offset = address - variable.base
    chunks = row // chunk
    line, column = offset // row, offset % row
    moved = ((column // chunk) ^ (line % chunks)) * chunk + column % chunk
    out = address.copy()
    out[mask] = variable.base + (line * row + moved)[mask]
    return out


def _count(accesses: WarpAccesses, address: np.ndarray, rules, weights: np.ndarray) -> dict[int, tuple[int, int]]:
    """instruction → (wavefronts, max ways), each execution counted ``weights`` times (the CTAs it stands for)."""
    from traceconf.engine import count_wavefronts

    changed = WarpAccesses(accesses.kernel, accesses.cta, accesses.warp, accesses.execution, accesses.instruction,
                           accesses.kind, accesses.bytes, accesses.matrices, address)
    wavefronts, _, max_ways = count_wavefronts(changed, rules)
    ids, slot = np.unique(changed.instruction, return_inverse=True)
    totals = np.bincount(slot, weights=wavefronts.astype(np.float64) * weights, minlength=len(ids))
    worst = np.zeros(len(ids), dtype=np.int64)
    np.maximum.at(worst, slot, max_ways)
    return {int(i): (int(round(t)), int(m)) for i, t, m in zip(ids.tolist(), totals.tolist(), worst.tolist())}


def suggest_for(analysis: KernelAnalysis, instruction: int, rules, tried: dict | None = None) -> Suggestion | None:
    """Best pad/swizzle for the variable ``instruction`` accesses, or None without addresses or a row pattern.

    ``tried`` caches the outcomes per (variable, row candidates): hotspots on the same tile share them."""
    accesses = analysis.accesses.get(rules.warp_size)
    if accesses is None or not len(accesses):
        return None
    own = accesses.instruction == instruction
    if not own.any():
        return None
    variable = variable_of(analysis, accesses.address[own])
    touches = np.any(_inside(accesses.address, variable), axis=1)
    ids = np.unique(accesses.instruction[touches])
    in_scope = np.nonzero(np.isin(accesses.instruction, ids))[0]
    scope = accesses.take(in_scope)
    kept = analysis.weights.get(rules.warp_size)
    weights = kept[in_scope] if kept is not None and len(kept) == len(accesses) else \
        np.full(len(scope), int(analysis.launch.get("scale", 1)), dtype=np.int64)
    mask = _inside(scope.address, variable)
    widest = int(scope.bytes.max())
    rows = row_candidates(accesses.address[own], int(accesses.bytes[own][0]), rules.bank_bytes)
    if not rows:
        return None
    # lanes may step several rows at once (68 words = 4 rows of 17) or a row and a column (18 words): only
    # the row the source declares can be padded, so when the source is readable that row is the candidate
    source = [r for r in analysis.instructions.to_pylist() if r["instruction"] == instruction]
    declared = declared_row(source[0]["source_file"], source[0]["source_line"], analysis.input_path,
                            variable.name) if source else None
    if declared is not None and declared[0] % rules.bank_bytes == 0 and declared[0] > int(accesses.bytes[own][0]):
        rows = [declared[0]]
    key = (variable.name, variable.base, tuple(rows))
    if tried is not None and key in tried:
        baseline, best = tried[key]
        return Suggestion(instruction, variable, rows[0], baseline, best)
    words = rules.bank_bytes
    baseline = Outcome("current layout", _count(scope, scope.address, rules, weights))
    outcomes = []
    flat = flat_array(source[0]["source_file"], source[0]["source_line"], analysis.input_path) if source else None
    if flat and (sequential := sequential_outcome(scope, weights, variable, flat, rules)) is not None:
        outcomes.append(sequential)
    for row in rows if not outcomes else []:
        for multiple in PAD_MULTIPLES:
            extra = max(widest, words) * multiple
            label = (f"pad {variable.name} row {row // words}→{(row + extra) // words} words"
                     if row % words == 0 else f"pad {variable.name} row {row}→{row + extra} B")
            outcomes.append(Outcome(label, _count(scope, pad(scope.address, mask, variable, row, extra), rules,
                                                  weights)))
        for chunk in SWIZZLE_CHUNKS:
            chunks = row // chunk
            if row % chunk or chunks < 2 or chunks & (chunks - 1) or chunk < widest:
                continue
            unit = "word" if chunk == words else f"{chunk}-B chunk"
            label = f"swizzle {variable.name}: {unit} index ^= row % {chunks} (rows of {row} B)"
            outcomes.append(Outcome(label, _count(scope, swizzle(scope.address, mask, variable, row, chunk), rules,
                                                  weights)))
    vector = vector_outcome(scope, weights, instruction, variable, rules)
    if vector is not None:
        outcomes.append(vector)
    best = min(outcomes, key=lambda o: o.wavefronts)
    best = best if best.wavefronts < baseline.wavefronts else None
    if tried is not None:
        tried[key] = (baseline, best)
    return Suggestion(instruction, variable, rows[0], baseline, best)


def vector_outcome(scope: WarpAccesses, weights: np.ndarray, instruction: int, variable: Variable, rules
                   ) -> Outcome | None:
    """Vector accesses instead of scalar ones: wherever an instruction like ``instruction`` (same kind and
    width) has its lanes ``v`` elements apart, 16-byte aligned at most, and sibling instructions executed
    alike read (write) the other ``v - 1`` elements at ``+j`` elements on every execution, the group becomes
    one ``v``-element access per lane; the rest of the variable's accesses are counted unchanged."""
    from traceconf.schemas import KIND_CODES
    first = np.flatnonzero(scope.instruction == instruction)[0]
    kind, size = int(scope.kind[first]), int(scope.bytes[first])
    if kind not in (KIND_CODES["ld"], KIND_CODES["st"]) or int(scope.matrices[first]) or size > 8:
        return None
    rows_of = {}
    for ident in np.unique(scope.instruction).tolist():
        rows = np.flatnonzero(scope.instruction == ident)
        if int(scope.kind[rows[0]]) == kind and int(scope.bytes[rows[0]]) == size:
            rows_of[ident] = rows
    by_content = {scope.address[rows].tobytes(): ident for ident, rows in rows_of.items()}
    heads, merged = {}, set()
    for ident, rows in rows_of.items():
        address = scope.address[rows]
        active = address != INACTIVE
        steps = (address[:, 1:] - address[:, :-1])[active[:, :-1] & active[:, 1:]]
        if not len(steps):
            continue
        values, counts = np.unique(steps, return_counts=True)
        step = int(values[np.argmax(counts)])
        elements = step // size
        if step % size or elements not in (2, 4) or step > 16 or np.any(address[active] % step):
            continue
        siblings = [by_content.get(np.where(active, address + j * size, INACTIVE).tobytes())
                    for j in range(1, elements)]
        if all(s is not None and s != ident for s in siblings):
            heads[ident] = elements
            merged.update(siblings)
    if instruction not in heads and instruction not in merged:
        return None
    keep = ~np.isin(scope.instruction, sorted(merged))
    changed = scope.take(np.flatnonzero(keep))
    widths = np.array([heads.get(i, 1) for i in changed.instruction.tolist()], dtype=np.int64)
    changed.bytes = (changed.bytes * widths).astype(scope.bytes.dtype)
    counted = _count(changed, changed.address, rules, weights[keep])
    counted.update({sibling: (0, 0) for sibling in merged})
    elements = heads.get(instruction) or max(heads.values())
    verb = "read" if kind == KIND_CODES["ld"] else "write"
    vector = f"float{elements}" if size == 4 else f"{elements} × {size} B"
    label = (f"{verb} {variable.name} as {elements * size}-byte vectors ({'ld' if verb == 'read' else 'st'}"
             f".shared.v{elements}, e.g. {vector}) instead of {elements} scalar {verb}s "
             f"({len(heads)} group(s))")
    return Outcome(label, counted)


def hotspots(analysis: KernelAnalysis, device: str, top: int) -> list[int]:
    """Instructions with excess wavefronts on ``device``, worst first."""
    results = analysis.results.filter(pc.equal(analysis.results.column("device"), device))
    rows = [r for r in results.to_pylist() if r["excess_wavefronts"] > 0]
    rows.sort(key=lambda r: (-r["excess_wavefronts"], r["instruction"]))
    return [r["instruction"] for r in rows[:top]]


def suggestions(analysis: KernelAnalysis, rules, top: int) -> list[tuple[int, Suggestion | None]]:
    """(instruction, suggestion or None when nothing can be tried) for the ``top`` hotspots on ``rules``."""
    tried: dict = {}
    return [(instruction, suggest_for(analysis, instruction, rules, tried))
            for instruction in hotspots(analysis, rules.name, top)]
