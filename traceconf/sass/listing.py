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
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from traceconf.errors import InputError
from traceconf.schemas import SASS_INSTRUCTIONS, SASS_KERNELS

_INSTRUCTION = (r"^[ \t]*/\*(?P<pc>[0-9a-fA-F]+)\*/[ \t]+(?:(?P<guard>@!?U?P(?:T|\d))[ \t]+)?"
                r"(?P<opcode>[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?:[ \t]+(?P<operands>[^;\n]*?))?[ \t]*;"
                r"(?:[ \t]*/\*[ \t]*0x[0-9a-fA-F]+[ \t]*\*/)?[ \t]*\r?$")
_FUNCTION = r"^[ \t]*Function[ \t]*:[ \t]*(?P<function>\S+)[ \t]*\r?$"
_SECTION = r"^[ \t]*\.section[ \t]+\.text\.(?P<section>[^,\s]+)"
_ARCH = r"(?:code[ \t]+for[ \t]+|^[ \t]*\.target[ \t]+|^arch[ \t]*=[ \t]*)(?P<arch>sm_\d+[a-z]?)"
_LINE_INFO = (r"^[ \t]*//##[ \t]*File[ \t]+\"(?P<file>[^\"]*)\",[ \t]*line[ \t]+(?P<line>\d+)"
              r"(?P<inlined>[ \t]+inlined at)?")
_LABEL = r"^(?P<label>\.L\w+|[A-Za-z_$][\w$]*):[ \t]*\r?$"
_ANY = re.compile("|".join(f"(?:{p})" for p in (_INSTRUCTION, _FUNCTION, _SECTION, _ARCH, _LINE_INFO, _LABEL)),
                  re.M)
#: Lines that start like an instruction; each must also match _INSTRUCTION.
_LOOKS_LIKE = re.compile(r"^[ \t]*/\*[0-9a-fA-F]+\*/[ \t]+(?:@|[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*[ \t]*[ ;A-Z\[\-`!|~0-9c])",
                         re.M)
#: nvdisasm -gp names the PTX text ptxas embedded with -lineinfo by this file name.
PTX_LINE_FILE = ".nv_debug_ptx_txt"
_SPLIT_OPERANDS = re.compile(r"\s*,\s*")
_REUSE = re.compile(r"\.reuse\b")

#: Detection: a listing holds instruction lines of this shape (or is nvdisasm -json).
SIGNATURE = re.compile(rb"^[ \t]*/\*[0-9a-fA-F]{4,}\*/[ \t]+(?:@!?U?P\w[ \t]+)?[A-Z][A-Z0-9_.]*[ \t]*[^;\n]*;", re.M)
JSON_SIGNATURE = re.compile(rb"^\s*\[\s*\{\s*\"ELF\"")
#: nvdisasm / cuobjdump headers that come before the first instruction (ELF sections may be long).
HEADER_SIGNATURE = re.compile(rb"^[ \t]*(?:code for sm_\d+|Function : \S+|\.elftype[ \t]+@|\.section[ \t]+\.text\.)", re.M)


#: Constant-bank-0 offset of the first parameter byte, by SASS generation (when the ELF does not say).
PARAM_BASES = ((90, 0x210), (70, 0x160), (30, 0x140), (20, 0x20))
_CONSTANT_READ = re.compile(r"\bc\[0x0\]\[(0x[0-9a-fA-F]+)\]")


def arch_number(arch: str | None) -> int:
    match = re.match(r"sm_(\d+)", arch or "")
    return int(match.group(1)) if match else 90


def default_param_base(arch: str | None) -> int:
    number = arch_number(arch)
    return next((base for since, base in PARAM_BASES if number >= since), 0x20)


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

    def instructions_of(self, name: str) -> list[dict]:
        import pyarrow.compute as pc
        return self.instructions.filter(pc.equal(self.instructions.column("kernel"), name)).to_pylist()


class _Builder:
    """Columns of the two tables, appended to as the listing is read."""

    def __init__(self):
        self.columns = {name: [] for name in SASS_INSTRUCTIONS.names}
        self.kernels: list[dict] = []
        self.pending_labels: list[str] = []

    def start_kernel(self, name: str, arch: str | None, line: int) -> None:
        self.kernels.append({"kernel": name, "arch": arch, "params": None, "param_base": None,
                             "shared_bytes": None, "listing_line": line})
        self.pending_labels = []

    def add(self, kernel, pc, guard, opcode, operands, labels, source, ptx_line, line, text) -> None:
        c = self.columns
        family, *modifiers = opcode.split(".")
        c["kernel"].append(kernel)
        c["instruction"].append(len(c["kernel"]) - 1)
        c["pc"].append(pc)
        c["opcode"].append(family)
        c["modifiers"].append(modifiers)
        c["operands"].append(operands)
        c["guard"].append(guard.lstrip("@!") if guard else None)
        c["guard_negated"].append(bool(guard) and guard.startswith("@!"))
        c["labels"].append(labels)
        c["source_file"].append(source[0] if source else None)
        c["source_line"].append(source[1] if source else None)
        c["ptx_line"].append(ptx_line)
        c["line"].append(line)
        c["text"].append(text)

    def module(self, path, arch) -> SassModule:
        return SassModule(path, arch, pa.table(self.columns, schema=SASS_INSTRUCTIONS),
                          pa.Table.from_pylist(self.kernels, schema=SASS_KERNELS))


def _operands(text: str | None) -> list[str]:
    if not text:
        return []
    return _SPLIT_OPERANDS.split(_REUSE.sub("", text.strip()))


def parse_text(text: str, path: str | None = None) -> SassModule:
    """Parse a ``cuobjdump -sass`` / ``nvdisasm`` listing (or ``nvdisasm -json`` output)."""
    if JSON_SIGNATURE.match(text[:64].encode()):
        return parse_json(text, path)
    builder = _Builder()
    arch = None
    kernel = None
    source = ptx_line = None
    inlined = False
    labels: list[str] = []
    line_no, line_pos = 1, 0
    matched = 0
    for match in _ANY.finditer(text):
        start = match.start()
        line_no += text.count("\n", line_pos, start)
        line_pos = start
        group = match.lastgroup
        if match.group("file") is None:
            inlined = False
        if match.group("pc") is not None:
            if kernel is None:
                raise InputError("SASS instruction outside any function (no 'Function :' or .text section before it)",
                                 path, line_no, 1, match.group(0).strip())
            opcode = match.group("opcode")
            operands = match.group("operands")
            guard = match.group("guard")
            body = f"{opcode} {operands.strip()}" if operands else opcode
            builder.add(kernel, int(match.group("pc"), 16), guard, opcode, _operands(operands), labels,
                        source, ptx_line, line_no, f"{guard} {body}" if guard else body)
            labels = []
            matched += 1
        elif match.group("function") is not None or match.group("section") is not None:
            kernel = match.group("function") or match.group("section")
            builder.start_kernel(kernel, arch, line_no)
            source, ptx_line, labels = None, None, []
        elif match.group("arch") is not None:
            arch = match.group("arch")
        elif match.group("file") is not None:
            if match.group("file") == PTX_LINE_FILE:     # nvdisasm -gp: the line of the PTX ptxas compiled
                ptx_line = int(match.group("line"))
            elif match.group("inlined") or not inlined:
                # -gi prints the inlined function's line, then the call site's: keep the innermost
                source = (match.group("file"), int(match.group("line")))
            inlined = bool(match.group("inlined"))
            continue
        elif group == "label" or match.group("label") is not None:
            label = match.group("label")
            if kernel is not None and label != kernel:
                labels = labels + [label]
    looks = _LOOKS_LIKE.findall(text)
    if len(looks) != matched:
        _raise_first_bad_line(text, path)
    if not matched:
        raise InputError("no SASS instruction found (expected `cuobjdump -sass` or `nvdisasm` output)", path, 1, 1)
    for row in builder.kernels:
        row["arch"] = row["arch"] or arch
    return builder.module(path, arch)


def _raise_first_bad_line(text: str, path: str | None) -> None:
    instruction = re.compile(_INSTRUCTION)
    for number, line in enumerate(text.splitlines(), 1):
        if _LOOKS_LIKE.match(line) and not instruction.match(line):
            body = line.split("*/", 1)[1]
            column = len(line) - len(body.lstrip()) + 1
            reason = "missing ';' after the operands" if ";" not in body else "malformed SASS instruction"
            raise InputError(reason, path, number, column, line.strip())


def parse_json(text: str, path: str | None = None) -> SassModule:
    """``nvdisasm -json``: [header, [function, ...]]; each function lists its instructions (16 bytes each)."""
    try:
        document = json.loads(text)
        header, functions = document[0], document[1]
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise InputError(f"not nvdisasm -json output ({exc})", path, 1, 1) from None
    version = (header.get("SM") or {}).get("version") or {}
    arch = f"sm_{version.get('major')}{version.get('minor')}" if version else None
    builder = _Builder()
    for function in functions:
        name = function["function-name"]
        builder.start_kernel(name, arch, None)
        start = int(function.get("start") or 0)
        for index, entry in enumerate(function.get("sass-instructions") or []):
            guard = entry.get("predicate")
            opcode, operands = entry["opcode"], entry.get("operands") or ""
            body = f"{opcode} {operands.replace(',', ', ')}" if operands else opcode
            builder.add(name, index * 16, guard, opcode, _operands(operands), [], None, None, None,
                        f"{guard} {body}" if guard else body)
        del start
    if not builder.columns["pc"]:
        raise InputError("nvdisasm -json output holds no instruction", path, 1, 1)
    return builder.module(path, arch)


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
