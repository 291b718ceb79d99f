"""SASS listings (``cuobjdump -sass``, ``nvdisasm`` with or without ``-g``/``-gi``, ``nvdisasm -json``)
→ the SASS_INSTRUCTIONS and SASS_KERNELS tables.

A listing is read with one regular expression over the whole text (not one
Python call per line): each match is a function header, an architecture line,
a line-info comment (``//## File "x.cu", line 12``), a label or an
instruction.  Lines that match none of them (encoding words, ELF sections,
``.byte`` data) are skipped; a line that starts like an instruction
(``/*0230*/`` then a mnemonic or guard) but does not parse as one is an
:class:`InputError` at its line and column.  ``grammars/sass.lark`` states the
instruction syntax; the tests check that this tokenizer and the grammar agree
on every instruction of the committed listings.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traceconf.errors import InputError, data_error_message
from traceconf.numbers import INT32_MAX, INT64_MAX, check_int
from traceconf.schemas import SASS_INSTRUCTIONS, SASS_KERNELS

_INSTRUCTION = (r"^[ \t]*/\*(?P<pc>[0-9a-fA-F]+)\*/[ \t]+(?:(?P<guard>@!?U?P(?:T|\d))[ \t]+)?"
                r"(?P<opcode>[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?:[ \t]+(?P<operands>[^;\n]*?))?[ \t]*;"
                r"(?:[ \t]*/\*[ \t]*0x[0-9a-fA-F]+[ \t]*\*/)?[ \t]*\r?$")
# Instructions and the structure around them are found by separate patterns that each start with a
# literal, so that the regex engine skips ahead with a fast substring search instead of trying every
# position; the matches are then merged by their offsets in the text (numpy searchsorted).
_INSTRUCTION_FAST = re.compile(
    r"/\*([0-9a-fA-F]+)\*/[ \t]+(?:(@!?U?P(?:T|\d))[ \t]+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
    r"[ \t]*([^;\n]*);(?:[ \t]*/\*[ \t]*0x[0-9a-fA-F]+[ \t]*\*/)?[ \t]*\r?$", re.M)   # operands: trimmed later
_FUNCTION = re.compile(r"Function[ \t]*:[ \t]*(\S+)[ \t]*\r?$", re.M)
_SECTION = re.compile(r"\.section[ \t]+\.text\.([^,\s]+)")
_ARCHES = (re.compile(r"code[ \t]+for[ \t]+(sm_\d+[a-z]?)"), re.compile(r"\.target[ \t]+(sm_\d+[a-z]?)"),
           re.compile(r"\narch[ \t]*=[ \t]*(sm_\d+[a-z]?)"))    # cuobjdump, nvdisasm, cuobjdump of a fatbin
_LINE_INFO = re.compile(r"//##[ \t]*File[ \t]+\"([^\"]*)\",[ \t]*line[ \t]+(\d+)([ \t]+inlined at)?")
#: An integer literal too long to be sure it fits in 64 bits (a closer look decides).
_LONG_NUMBER = re.compile(r"(?<![\w.])(?:0[xX][0-9a-fA-F]{17,}|\d{20,})")
_LABELS = (re.compile(r"\n(\.L\w+):[ \t]*\r?$", re.M), re.compile(r"\n(\$[\w$]+):[ \t]*\r?$", re.M))  # .L_x_3, $k$callee
#: Lines that start like an instruction; each must also match _INSTRUCTION (a literal first, as above).
_LOOKS_LIKE = re.compile(r"/\*[0-9a-fA-F]+\*/[ \t]+(?:@|[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*[ \t]*[ ;A-Z\[\-`!|~0-9c])")
#: nvdisasm -gp names the PTX text ptxas embedded with -lineinfo by this file name.
PTX_LINE_FILE = ".nv_debug_ptx_txt"

#: Detection: a listing holds instruction lines of this shape (or is nvdisasm -json).
SIGNATURE = re.compile(rb"^[ \t]*/\*[0-9a-fA-F]{4,}\*/[ \t]+(?:@!?U?P\w[ \t]+)?[A-Z][A-Z0-9_.]*[ \t]*[^;\n]*;", re.M)
JSON_SIGNATURE = re.compile(rb"^\s*\[\s*\{\s*\"ELF\"")
#: nvdisasm / cuobjdump headers that come before the first instruction (ELF sections may be long).
HEADER_SIGNATURE = re.compile(rb"^[ \t]*(?:code for sm_\d+|Function : \S+|\.elftype[ \t]+@|\.section[ \t]+\.text\.)", re.M)


#: Constant-bank-0 offset of the first parameter byte, by SASS generation (when the ELF does not say).
PARAM_BASES = ((90, 0x210), (70, 0x160), (30, 0x140), (20, 0x20))
#: Where the local stack pointer R1 is loaded from (c[0x0][offset]: ``LDC R1, c[0x0][0x28]``), per architecture.
STACK_POINTERS = ((70, 0x28), (30, 0x20))
#: The value the emulator gives it: local addresses are private to a thread, any value serves.
STACK_TOP = 0xFF_FFF0
_CONSTANT_READ = re.compile(r"\bc\[0x0\]\[(0x[0-9a-fA-F]+)\]")


def arch_number(arch: str | None) -> int:
    match = re.match(r"sm_(\d+)", arch or "")
    return int(match.group(1)) if match else 90


def default_param_base(arch: str | None) -> int:
    number = arch_number(arch)
    return next((base for since, base in PARAM_BASES if number >= since), 0x20)


def stack_pointer_offset(arch: str | None) -> int | None:
    number = arch_number(arch)
    return next((offset for since, offset in STACK_POINTERS if number >= since), None)


def params_read(rows: list[dict], arch: str | None) -> list[dict]:
    """Parameters of a listing without ELF facts: the parameter-block words its code reads.

    Each run of bytes read from constant bank 0 at or past the parameter base is one parameter, named by
    its byte offset in the parameter block (``param@0x18``); unread parameters cannot be named.
    """
    base = default_param_base(arch)
    spans: dict[int, int] = {}
    for row in rows:
        for operand in row["operands"] or []:
            for text in _CONSTANT_READ.findall(operand):
                offset = int(text, 16) - base
                if offset >= 0:
                    size = 8 if "64" in (row["modifiers"] or []) else 4
                    spans[offset] = max(spans.get(offset, 0), size)
    params, end = [], -1
    for offset in sorted(spans):
        if offset < end:
            continue
        params.append({"name": f"param@{offset:#x}", "offset": offset, "bytes": spans[offset]})
        end = offset + spans[offset]
    return params


@dataclass
class SassModule:
    """A parsed SASS listing: one row per instruction, one per function."""

    path: str | None
    arch: str | None
    instructions: pa.Table
    kernels: pa.Table
    notes: list[str] = field(default_factory=list)
    from_ptx: bool = False      # ``path`` is the PTX ptxas assembled (errors cite its lines: -gp's ptx_line)
    constants: dict[str, dict[int, bytes]] = field(default_factory=dict)  # kernel ("" all) -> bank -> bytes
    globals: list[dict] = field(default_factory=list)   # module globals (__device__): name, bytes, init
    relocations: dict[str, dict[int, list]] = field(default_factory=dict)  # kernel -> bank -> [(offset, symbol,
    #                                                                         addend, bytes)]
    #: kernel -> its instruction rows, read once (an analysis reads them several times; a copy made by
    #: ``replace`` starts empty)
    _rows: dict[str, list[dict]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def constant_banks(self, kernel: str, addresses: dict[str, int] | None = None) -> dict[int, bytes]:
        """The contents of a kernel's constant banks other than 0, as far as the binary told them, with the
        addresses the loader writes into them (its relocations) where ``addresses`` gives the symbol's."""
        banks = {**self.constants.get("", {}), **self.constants.get(kernel, {})}
        relocations = {**self.relocations.get("", {}), **self.relocations.get(kernel, {})}
        for bank, rows in relocations.items():
            data = bytearray(banks.get(bank, b""))
            for offset, symbol, addend, size in rows:
                if symbol in (addresses or {}):
                    data.extend(bytes(max(0, offset + size - len(data))))
                    value = (addresses[symbol] + addend) & ((1 << 8 * size) - 1)
                    data[offset:offset + size] = value.to_bytes(size, "little")
            banks[bank] = bytes(data)
        return banks

    def kernel_names(self) -> list[str]:
        return self.kernels.column("kernel").to_pylist()

    def kernel(self, name: str) -> dict:
        for row in self.kernels.to_pylist():
            if row["kernel"] == name:
                if row["params"] is None:
                    row["params"] = params_read(self.instructions_of(name), row["arch"] or self.arch)
                    row["params_inferred"] = True
                return row
        raise KeyError(name)

    def arches(self) -> list[str]:
        """The architectures whose code the listing holds (a fatbin or executable may embed several)."""
        found = {row["arch"] for row in self.kernels.to_pylist() if row["arch"]}
        return sorted(found or ({self.arch} if self.arch else set()), key=arch_number)

    def for_arch(self, arch: str) -> "SassModule":
        """The functions compiled for ``arch`` alone: a binary for several architectures holds every kernel once
        per architecture, under one name (each function's instructions are the listing lines up to the next
        function's header)."""
        rows = self.kernels.to_pylist()
        starts = [row["listing_line"] for row in rows]
        if len(self.arches()) < 2 or None in starts:
            return self
        ends = starts[1:] + [1 << 31]
        spans = [(start, end) for row, start, end in zip(rows, starts, ends) if row["arch"] == arch]
        line = self.instructions.column("line").to_numpy(zero_copy_only=False)
        keep = np.zeros(len(line), dtype=bool)
        for start, end in spans:
            keep |= (line > start) & (line < end)
        kernels = pa.Table.from_pylist([row for row in rows if row["arch"] == arch], schema=SASS_KERNELS)
        return replace(self, arch=arch, instructions=self.instructions.filter(pa.array(keep)), kernels=kernels)

    def instructions_of(self, name: str) -> list[dict]:
        """The kernel's instruction rows (a new list; the rows are shared: read them, do not change them)."""
        rows = self._rows.get(name)
        if rows is None:
            rows = self._rows[name] = self.instructions.filter(
                pc.equal(self.instructions.column("kernel"), name)).to_pylist()
        return list(rows)


class _Columns:
    """Raw per-instruction values, appended in the scan loop and turned into the table in bulk."""

    def __init__(self):
        self.kernel, self.pc, self.guard, self.opcode, self.operands = [], [], [], [], []
        self.labels, self.source_file, self.source_line, self.ptx_line, self.line = [], [], [], [], []
        self.kernels: list[dict] = []

    def start_kernel(self, name: str, arch: str | None, line: int | None) -> None:
        self.kernels.append({"kernel": name, "arch": arch, "params": None, "param_base": None,
                             "shared_bytes": None, "listing_line": line})

    def module(self, path, arch) -> SassModule:
        """Split opcodes, operands and guards with Arrow kernels over all instructions at once."""
        n = len(self.pc)
        opcode = pa.array(self.opcode, pa.string())
        parts = pc.split_pattern(opcode, ".")
        family = pc.list_element(parts, 0)
        modifiers = pc.list_slice(parts, 1)
        operands_text = pc.utf8_rtrim_whitespace(pa.array(self.operands, pa.string()))
        operands_text = pc.if_else(pc.equal(operands_text, ""), pa.scalar(None, pa.string()), operands_text)
        cleaned = pc.replace_substring(operands_text, ".reuse", "")    # a register-reuse hint, not an operand
        operands = pc.split_pattern(pc.fill_null(cleaned, ""), ", ")
        empty = pc.equal(pc.fill_null(operands_text, ""), "")
        operands = pc.if_else(empty, pa.scalar([], pa.list_(pa.string())), operands)
        guard_text = pa.array(self.guard, pa.string())
        guard = pc.replace_substring(pc.replace_substring(guard_text, "@!", ""), "@", "")
        negated = pc.fill_null(pc.starts_with(guard_text, "@!"), False)
        body = pc.binary_join_element_wise(opcode, operands_text, " ", null_handling="skip")
        text = pc.binary_join_element_wise(guard_text, body, " ", null_handling="skip")
        table = pa.table({
            "kernel": _arrow(self.kernel, pa.string()),
            "instruction": pa.array(np.arange(n, dtype=np.int32)),
            "pc": pa.array(self.pc, pa.int64()),
            "opcode": family, "modifiers": modifiers, "operands": operands,
            "guard": guard, "guard_negated": negated,
            "labels": _arrow(self.labels, pa.list_(pa.string())),
            "source_file": _arrow(self.source_file, pa.string()),
            "source_line": _arrow(self.source_line, pa.int32()),
            "ptx_line": _arrow(self.ptx_line, pa.int32()),
            "line": _arrow(self.line, pa.int32()),
            "text": text,
        }, schema=SASS_INSTRUCTIONS)
        return SassModule(path, arch, table, pa.Table.from_pylist(self.kernels, schema=SASS_KERNELS))


def _arrow(values, type_: pa.DataType) -> pa.Array:
    """Columns come as Python lists (JSON path) or ready Arrow / numpy arrays (text path)."""
    if isinstance(values, pa.Array):
        return values.cast(type_) if values.type != type_ else values
    return pa.array(values, type_)


def parse_text(text: str, path: str | None = None) -> SassModule:
    """Parse a ``cuobjdump -sass`` / ``nvdisasm`` listing (or ``nvdisasm -json`` output)."""
    if JSON_SIGNATURE.match(text[:64].encode()):
        return parse_json(text, path)
    found = [(m.start(), *m.groups()) for m in _INSTRUCTION_FAST.finditer(text)]
    if len(_LOOKS_LIKE.findall(text)) != len(found):
        _raise_first_bad_line(text, path)
    if not found:
        raise InputError("no SASS instruction found (expected `cuobjdump -sass` or `nvdisasm` output)", path, 1, 1)
    starts, pc_texts, guards, opcodes, operands = (list(column) for column in zip(*found))
    if _LONG_NUMBER.search(text):
        _check_immediates(starts, operands, text, path)
    at = np.asarray(starts, dtype=np.int64)
    newlines = np.flatnonzero(np.frombuffer(text.encode("utf-8", "surrogateescape"), dtype=np.uint8) == 10) \
        if text.isascii() else np.array([i for i, ch in enumerate(text) if ch == "\n"], dtype=np.int64)

    def line_of(offsets) -> np.ndarray:
        return np.searchsorted(newlines, np.asarray(offsets, dtype=np.int64)) + 1

    columns = _Columns()
    # functions (cuobjdump "Function : name", nvdisasm ".section .text.name") and the architecture
    heads = sorted(([(m.start(), m.group(1)) for m in _FUNCTION.finditer(text)] if "Function" in text else [])
                   + ([(m.start(), m.group(1)) for m in _SECTION.finditer(text)] if ".section" in text else []))
    arches = sorted((m.start(), m.group(1)) for pattern in _ARCHES for m in pattern.finditer(text))
    if not heads or heads[0][0] > starts[0]:
        line = int(line_of([starts[0]])[0])
        raise InputError("SASS instruction outside any function (no 'Function :' or .text section before it)",
                         path, line, 1, text[starts[0]:text.find("\n", starts[0])].strip())
    head_at = np.array([h[0] for h in heads], dtype=np.int64)
    arch_at = np.array([a[0] for a in arches], dtype=np.int64)
    for position, name in heads:
        index = int(np.searchsorted(arch_at, position)) - 1
        columns.start_kernel(name, arches[index][1] if index >= 0 else None, int(line_of([position])[0]))
    owner = np.searchsorted(head_at, at) - 1
    names = np.array([h[1] for h in heads], dtype=object)
    # line info: the last "//## File" comment before each instruction (since its function began)
    events = [(m.start(), m.end(), *m.groups()) for m in _LINE_INFO.finditer(text)] if "//##" in text else []
    _check_numbers([(start, number) for start, _, _, number, _ in events], INT32_MAX, "line number", 10, text, path)
    ptx_events = [(start, int(number)) for start, _, file, number, _ in events if file == PTX_LINE_FILE]
    cuda = [event for event in events if event[2] != PTX_LINE_FILE]
    if "inlined at" in text:
        # -gi prints the inlined function's line, then the call site's: keep the innermost
        kept, previous = [], None
        for event in cuda:
            if not (previous and previous[4] and not _INSTRUCTION_FAST.search(text, previous[1], event[0])):
                kept.append(event)
            previous = event
        cuda = kept
    cuda_events = [(start, file, int(number)) for start, _, file, number, _ in cuda]
    files, lines = _last_before(at, head_at, cuda_events, 2)
    (ptx_lines,) = _last_before(at, head_at, ptx_events, 1)
    found_labels = sorted((m.start(), m.group(1)) for pattern in _LABELS for m in pattern.finditer(text)) \
        if ":\n" in text else []
    label_target = np.zeros(0, dtype=np.int64)
    label_names: list[str] = []
    if found_labels:
        label_at = np.array([position for position, _ in found_labels], dtype=np.int64)
        target = np.searchsorted(at, label_at)
        same_function = (target < len(at)) & (owner[np.minimum(target, len(at) - 1)] ==
                                              np.searchsorted(head_at, label_at) - 1)
        label_target = target[same_function]
        label_names = [label for (_, label), keep in zip(found_labels, same_function.tolist()) if keep]
    # labels of instruction i: the found labels whose target is i (targets are sorted by offset)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(label_target, minlength=len(at)))]).astype(np.int32)
    columns.labels = pa.ListArray.from_arrays(pa.array(offsets), pa.array(label_names, pa.string()))
    columns.kernel = pa.array(names.tolist(), pa.string()).take(pa.array(owner))
    _check_numbers(list(zip(starts, pc_texts)), INT64_MAX, "address", 16, text, path)
    columns.pc = [int(p, 16) for p in pc_texts]
    columns.guard, columns.opcode, columns.operands = guards, opcodes, operands
    columns.source_file, columns.source_line, columns.ptx_line = files, lines, ptx_lines
    columns.line = pa.array(line_of(at).astype(np.int32))
    arch = arches[-1][1] if arches else None
    for row in columns.kernels:
        row["arch"] = row["arch"] or arch
    return columns.module(path, arch)


def _check_immediates(starts: list[int], operands: list, text: str, path: str | None) -> None:
    """No operand holds an integer wider than 64 bits (SASS encodes at most 32-bit immediates and 64-bit
    addresses; a longer number is a damaged listing, not a value to wrap)."""
    for start, operand in zip(starts, operands):
        for match in _LONG_NUMBER.finditer(operand or ""):
            if not -(1 << 63) <= int(match.group(0), 0) < 1 << 64:
                line = text.count("\n", 0, start) + 1
                raise InputError(f"integer {match.group(0)} does not fit in 64 bits", path, line, None,
                                 text[text.rfind("\n", 0, start) + 1:text.find("\n", start)].strip())


def _check_numbers(found: list[tuple[int, str]], high: int, what: str, base: int, text: str,
                   path: str | None) -> None:
    """Each (offset, digits) of ``text`` is at most ``high`` (what its column holds), else a located error
    at its line; only numbers as long as ``high`` are converted, so a normal listing costs a length test."""
    longest = len(format(high, "x" if base == 16 else "d"))
    for offset, digits in found:
        if len(digits.lstrip("0")) >= longest:
            check_int(int(digits, base), path, what=what, text=digits, low=0, high=high,
                      line=text.count("\n", 0, offset) + 1)


def _last_before(at: np.ndarray, head_at: np.ndarray, events: list[tuple], width: int) -> list[list]:
    """For each instruction offset, the values of the last event before it inside the same function."""
    if not events:
        return [pa.nulls(len(at)) for _ in range(width)]
    event_at = np.array([e[0] for e in events], dtype=np.int64)
    index = np.searchsorted(event_at, at) - 1
    head = head_at[np.searchsorted(head_at, at) - 1]
    valid = (index >= 0) & (event_at[np.maximum(index, 0)] > head)
    chosen = pa.array(np.where(valid, index, len(events)))
    return [pa.array([e[position] for e in events] + [None]).take(chosen) for position in range(1, width + 1)]


def _raise_first_bad_line(text: str, path: str | None) -> None:
    instruction = re.compile(_INSTRUCTION)
    for number, line in enumerate(text.splitlines(), 1):
        if _LOOKS_LIKE.match(line.lstrip()) and not instruction.match(line):
            body = line.split("*/", 1)[1]
            column = len(line) - len(body.lstrip()) + 1
            reason = "missing ';' after the operands" if ";" not in body else "malformed SASS instruction"
            raise InputError(reason, path, number, column, line.strip())


def parse_json(text: str, path: str | None = None) -> SassModule:
    """``nvdisasm -json``: [header, [function, ...]]; each function lists its instructions (16 bytes each).
    Every record is checked for the shape nvdisasm writes: a record without its opcode, or with a number
    where text belongs, is a located error naming the function and instruction."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"not nvdisasm -json output ({data_error_message(exc)})", path, 1, 1) from None
    if not (isinstance(document, list) and len(document) >= 2 and isinstance(document[0], dict)
            and isinstance(document[1], list)):
        raise InputError("not nvdisasm -json output (expected [header, [function, ...]])", path, 1, 1)
    header, functions = document[0], document[1]
    sm = header.get("SM")
    version = sm.get("version") if isinstance(sm, dict) else None
    arch = None
    if isinstance(version, dict) and version:
        major, minor = version.get("major"), version.get("minor")
        if not (_small_int(major) and _small_int(minor)):
            raise InputError(f"nvdisasm -json header: SM version {major!r}.{minor!r} is not two small numbers",
                             path, 1, 1)
        arch = f"sm_{major}{minor}"
    columns = _Columns()
    for number, function in enumerate(functions):
        where = f"nvdisasm -json function {number}"
        name = function.get("function-name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}: no function-name", path, 1, 1)
        instructions = function.get("sass-instructions") or []
        if not isinstance(instructions, list):
            raise InputError(f"{where} ({name}): sass-instructions is not a list", path, 1, 1)
        columns.start_kernel(name, arch, None)
        for index, entry in enumerate(instructions):
            fields = {key: entry.get(key) if isinstance(entry, dict) else None
                      for key in ("opcode", "predicate", "operands")}
            if not isinstance(fields["opcode"], str) or not fields["opcode"].strip():
                raise InputError(f"{where} ({name}), instruction {index}: no opcode", path, 1, 1)
            bad = [key for key in ("predicate", "operands")
                   if fields[key] is not None and not isinstance(fields[key], str)]
            if bad:
                raise InputError(f"{where} ({name}), instruction {index}: {bad[0]} is not text", path, 1, 1)
            columns.kernel.append(name)
            columns.pc.append(index * 16)
            columns.guard.append(fields["predicate"])
            columns.opcode.append(fields["opcode"])
            # the same spelling as the text listings: "R1, c[0x0][0x28]"
            columns.operands.append((fields["operands"] or "").replace(",", ", ") or None)
            columns.labels.append([])
            for column in (columns.source_file, columns.source_line, columns.ptx_line, columns.line):
                column.append(None)
    if not columns.pc:
        raise InputError("nvdisasm -json output holds no instruction", path, 1, 1)
    return columns.module(path, arch)


def _small_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1000


def parse_file(path: str | Path) -> SassModule:
    path = str(path)
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from None
    return parse_text(text, path)


def looks_like_sass(head: bytes) -> bool:
    """Detection by content: instruction lines in the SASS listing shape, or nvdisasm -json."""
    return bool(SIGNATURE.search(head) or JSON_SIGNATURE.match(head) or HEADER_SIGNATURE.search(head))
