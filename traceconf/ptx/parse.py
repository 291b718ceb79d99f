"""PTX text → :class:`PtxModule` (KERNELS + INSTRUCTIONS tables).

Steps: bytes are checked and decoded (binary files and non-UTF-8 bytes are
reported, not crashed on); comments are blanked with spaces so that every
later stage sees the same positions; the statement cache
(:mod:`traceconf.ptx.statements`) reads the file, or — when it cannot vouch
for this input (malformed PTX, mostly) — the grammar parses this whole file
and reports the precise error; the records become Arrow tables.

:func:`parse_ptx` / :func:`parse_file` are the one production path.
:func:`parse_ptx_by_grammar` is the definition it is checked against: the
plain whole-file Lark parse, used by the differential tests and the parse
benchmark, never by the CLI.
"""

from __future__ import annotations

import gc
import re
import struct
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from lark.exceptions import UnexpectedInput

from traceconf.errors import InputError, reading
from traceconf.ptx.bodies import Bodies
from traceconf.ptx.diagnostics import error_at, translate
from traceconf.ptx.grammar import ptx_parser
from traceconf.ptx.opcodes import may_access_shared
from traceconf.ptx.scan import NextOf
from traceconf.ptx.statements import Fallback, StatementCache
from traceconf.ptx.tables import ModuleHeader, TableBuilder
from traceconf.ptx.transform import StatementError

_COMMENT_OR_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*(?:[^*]|\*(?!/))*\*/|/\*')
_NOT_NEWLINE = re.compile(r"[^\n]")


@dataclass
class PtxModule:
    """A parsed PTX file: its functions (KERNELS) and their instructions (INSTRUCTIONS).

    A ``cuobjdump -ptx`` dump may hold several PTX modules; ``modules`` lists
    their headers and ``version``/``target``/``address_size`` are the first
    one's.  A kernel that a later module defines again (the same code for
    another architecture) is named ``name@target`` there.
    """

    path: str
    kernels: pa.Table
    instructions: pa.Table
    modules: list[ModuleHeader] = field(repr=False)
    _rows: dict[str, tuple[int, int]] = field(repr=False)
    _module_of: dict[str, int] = field(default_factory=dict, repr=False)   # function -> index in ``modules``

    @property
    def version(self) -> str | None:
        return self.modules[0].version

    @property
    def target(self) -> str | None:
        return self.modules[0].target

    @property
    def address_size(self) -> int:
        return self.modules[0].effective_address_size

    def kernel_names(self) -> list[str]:
        """Names of the ``.entry`` kernels, in file order."""
        entry = self.kernels.column("entry").to_pylist()
        return [name for name, is_entry in zip(self.kernels.column("kernel").to_pylist(), entry) if is_entry]

    def function_names(self) -> list[str]:
        """Names of every function (entries and ``.func``), in file order."""
        return self.kernels.column("kernel").to_pylist()

    @cached_property
    def _kernel_rows(self) -> dict[str, int]:
        """KERNELS row number of each function name (the first, as a later module renames its copies)."""
        rows: dict[str, int] = {}
        for index, name in enumerate(self.kernels.column("kernel").to_pylist()):
            rows.setdefault(name, index)
        return rows

    def kernel(self, name: str) -> dict:
        """The KERNELS row of ``name`` as a dict."""
        if name not in self._kernel_rows:
            raise KeyError(self._unknown(name))
        return self.kernels.slice(self._kernel_rows[name], 1).to_pylist()[0]

    def module_globals(self, name: str) -> list[dict]:
        """The ``.global`` variables (``__device__``) of the module that holds function ``name`` (the emulator keeps
        those the kernel's code names): name, bytes, initial contents (``init``: the initialiser's bytes, None
        when zero-initialised) and ``unknown``: the initialiser holds addresses (``{f, g}``), which this level
        does not know; ``.extern`` ones are defined elsewhere and left out."""
        header = self.modules[self._module_of.get(name, 0)]
        return [{"name": v.name, "bytes": v.bytes, "init": initial_bytes(v, self.path),
                 "unknown": any(isinstance(value, str) for value in v.initial or ())}
                for v in header.variables if v.space == "global" and "extern" not in v.linkage]

    def instructions_of(self, name: str) -> list[dict]:
        """INSTRUCTIONS rows of function ``name`` as dicts, in ordinal order."""
        if name not in self._rows:
            if name in self.function_names():
                return []     # a prototype without a body
            raise KeyError(self._unknown(name))
        start, count = self._rows[name]
        return self.instructions.slice(start, count).to_pylist()

    def shared_instructions(self) -> pa.Table:
        """Instructions that may access shared memory (:func:`~traceconf.ptx.opcodes.may_access_shared`):
        the shared state space, or a generic address that the emulator may find in the shared window."""
        table = self.instructions
        keys = pc.binary_join_element_wise(table.column("opcode"), pc.fill_null(table.column("state_space"), ""),
                                           ".")
        distinct = pc.unique(keys).to_pylist()
        wanted = [key for key in distinct if may_access_shared(*key.split(".", 1))]
        return table.filter(pc.is_in(keys, pa.array(wanted, pa.string())))

    def _unknown(self, name: str) -> str:
        return f"no function '{name}' in {self.path} (functions: {', '.join(self.function_names()) or 'none'})"


#: struct codes of the PTX scalar types an initialiser may fill (little-endian, as the GPU stores them).
_PACK = {"b8": "B", "u8": "B", "s8": "b", "b16": "H", "u16": "H", "s16": "h", "f16": "e", "b32": "I", "u32": "I",
         "s32": "i", "f32": "f", "b64": "Q", "u64": "Q", "s64": "q", "f64": "d"}


def initial_bytes(variable, path: str) -> bytes | None:
    """The bytes a variable's initialiser gives it, the elements it leaves out zero (None: no initialiser)."""
    if variable.initial is None:
        return None
    code = _PACK.get((variable.type or "").rsplit(".", 1)[-1])
    if code is None:
        raise InputError(f"{variable.name}: initialiser of type .{variable.type} is not read", path, variable.line)
    packed = bytearray(variable.bytes)
    size = struct.calcsize(code)
    for index, value in enumerate(variable.initial[:variable.bytes // size]):
        if isinstance(value, str):               # an address: the emulator does not know it (``unknown``)
            continue
        if code in "efd":
            struct.pack_into("<" + code, packed, index * size, float(value))
        else:
            struct.pack_into("<" + code.upper(), packed, index * size, int(value) & ((1 << 8 * size) - 1))
    return bytes(packed)


def decode(data: bytes, filename: str) -> str:
    """PTX bytes → text; binary data and invalid UTF-8 are InputErrors with a location."""
    if data.startswith(b"\x7fELF"):
        raise InputError("this is an ELF binary (a cubin or executable?), not PTX text; "
                         "extract the PTX with `cuobjdump -ptx`", filename)
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        column = nul - (data.rfind(b"\n", 0, nul) + 1) + 1
        raise InputError(f"binary data (NUL byte at offset {nul}): expected PTX text", filename, line, column)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = error.start
        line = data.count(b"\n", 0, bad) + 1
        column = bad - (data.rfind(b"\n", 0, bad) + 1) + 1
        source = data.split(b"\n")[line - 1].decode("utf-8", "replace").replace("\t", " ")
        # Show the line only when it is text with a stray byte, not a screenful of binary.
        printable = sum(ch.isprintable() for ch in source) >= 0.9 * len(source) and len(source) <= 200
        raise InputError(f"invalid UTF-8 byte 0x{data[bad]:02x}: PTX must be ASCII/UTF-8 text",
                         filename, line, column, source if printable else None) from None


def blank_comments(text: str, filename: str) -> str:
    """Comments replaced by spaces (newlines kept): positions and line numbers stay valid."""
    pieces, position, copied = [], 0, 0
    needles = NextOf(text, "/\"")       # '/' and '"' are rare in PTX
    while True:
        start = needles.after(position)
        if start < 0:
            break
        match = _COMMENT_OR_STRING.match(text, start)
        if match is None:                       # a lone '/' or an unterminated string
            position = start + 1
            continue
        token = match.group()
        if token == "/*":
            raise error_at("unterminated /* comment", filename, text, match.start())
        if token[0] != '"':
            pieces.append(text[copied:match.start()])
            pieces.append(" " * len(token) if token[1] == "/" else _NOT_NEWLINE.sub(" ", token))
            copied = match.end()
        position = match.end()
    pieces.append(text[copied:])
    return "".join(pieces)


def grammar_records(text: str, filename: str) -> tuple[list, Bodies]:
    """Records of comment-blanked ``text`` by one whole-file Lark parse, and their bodies;
    a parse error becomes the InputError users see."""
    bodies = Bodies()
    try:
        return bodies.compact(ptx_parser().parse(text)), bodies
    except UnexpectedInput as error:
        raise translate(error, filename, text) from None
    except StatementError as error:
        raise error_at(error.message, filename, text, error.token.start_pos) from None


def statement_records(text: str, filename: str) -> tuple[list, Bodies]:
    """Records of comment-blanked ``text`` by the statement cache, or by the grammar where the
    statement cache cannot vouch for this input."""
    statements = StatementCache(ptx_parser())
    try:
        return statements.parse(text), statements.bodies
    except Fallback:
        return grammar_records(text, filename)


def parse_ptx(text: str | bytes, filename: str = "<string>") -> PtxModule:
    """Parse PTX source (a module or a ``cuobjdump -ptx`` dump).

    Raises :class:`traceconf.errors.InputError`.
    """
    return _parse(text, filename, statement_records)


def parse_ptx_by_grammar(text: str | bytes, filename: str = "<string>") -> PtxModule:
    """The reference: :func:`parse_ptx` with the whole file parsed by the Lark grammar.

    The grammar is the definition of PTX here; the differential tests check
    that :func:`parse_ptx` gives exactly these tables and errors.  Slower, and
    not used by the CLI.
    """
    return _parse(text, filename, grammar_records)


def _parse(text: str | bytes, filename: str, read_records) -> PtxModule:
    # Parsing allocates millions of small, acyclic objects: the cyclic garbage
    # collector would rescan them again and again for nothing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        records, bodies = read_records(prepare(text, filename), filename)
        return build_module(filename, records, bodies)
    finally:
        if collecting:
            gc.enable()


def prepare(text: str | bytes, filename: str) -> str:
    """Decoded, comment-blanked text (what both record readers take)."""
    if isinstance(text, bytes):
        text = decode(text, filename)
    if not text.strip():
        raise InputError("empty file: no PTX to parse", filename)
    blanked = blank_comments(text, filename)
    if not blanked.strip():
        raise InputError("no PTX statements (the file holds only comments)", filename)
    return blanked


def build_module(filename: str, records: list, bodies: Bodies) -> PtxModule:
    """Records and their bodies → the tables of a :class:`PtxModule`."""
    builder = TableBuilder(filename, bodies)
    builder.add(records)
    kernels, instructions = builder.tables()
    rows, start = {}, 0
    for name, count in zip(builder.defined_names, builder.counts):
        rows[name] = (start, count)
        start += count
    return PtxModule(filename, kernels, instructions, builder.modules, rows,
                     {name: row["_module"] for name, row in builder.kernel_rows.items()})


def parse_file(path: str | Path) -> PtxModule:
    """Parse a PTX file; unreadable files are InputErrors too."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror or error}", str(path)) from None
    with reading(str(path)):        # a value no check above caught: still this file's fault, named as such
        return parse_ptx(data, str(path))
