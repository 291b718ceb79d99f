"""Lark transformer: PTX parse → :mod:`traceconf.ptx.records`.

Runs inline in the LALR parser (no parse tree is built).  ``source`` must be
the exact text being parsed: operand and instruction texts are slices of it.
"""

from __future__ import annotations

import math
import struct

from lark import Token, Transformer, v_args

from traceconf.ptx.opcodes import TYPE_BYTES, UnknownOpcode, opcode_info
from traceconf.ptx.records import (CLOSE_SCOPE, OPEN_SCOPE, AddressSize, DumpLine, FileDecl, Function,
                                   Instruction, Label, Loc, Operand, Parameter, Target, Variable, Version)

#: ``WARP_SZ`` is the one predefined PTX constant.
PREDEFINED_CONSTANTS = {"WARP_SZ": 32}
LOC_ATTRIBUTES = ("function_name", "inlined_at")
VECTOR_WIDTHS = {".v2": 2, ".v4": 4, ".v8": 8}
#: Bounds of declared sizes: beyond them no device has the memory, and products could overflow 64 bits.
MAX_REGISTER_RANGE = (1 << 24) - 1
MAX_ARRAY_LENGTH = (1 << 40) - 1
MAX_ALIGN = 1 << 16
#: The largest declared variable in bytes (an int64 column; far beyond any device memory).
MAX_VARIABLE_BYTES = (1 << 48) - 1


class StatementError(Exception):
    """A semantic error found while transforming; the parser turns it into an InputError."""

    def __init__(self, message: str, token: Token):
        super().__init__(message)
        self.message = message
        self.token = token


def parse_int(text: str) -> int:
    """PTX integer literal (hex, binary, octal, decimal, optional ``U``) as a signed 64-bit value."""
    digits = text[:-1] if text.endswith("U") else text
    try:
        if digits[:2] in ("0x", "0X"):
            value = int(digits[2:], 16)
        elif digits[:2] in ("0b", "0B"):
            value = int(digits[2:], 2)
        elif len(digits) > 1 and digits[0] == "0":
            value = int(digits[1:], 8)
        else:
            value = int(digits)
    except ValueError:
        raise ValueError(f"invalid integer constant '{text}' (a leading 0 means octal)") from None
    if value >= 1 << 64:
        raise ValueError(f"integer constant {text} does not fit in 64 bits")
    return value - (1 << 64) if value >= 1 << 63 else value


def negate(value: int) -> int:
    """``-value`` in 64-bit two's complement (``-0x8000000000000000`` is itself, as the hardware computes it)."""
    return -value if value != INT64_MIN else value


#: The range of every integer the tables store in 64 bits, and of the 32-bit line/column/count fields.
INT64_MIN = -(1 << 63)
INT32_MAX = (1 << 31) - 1
#: The only address sizes PTX defines.
ADDRESS_SIZES = (32, 64)


def check_range(value: int, low: int, high: int, what: str, text: str) -> int:
    """``value`` if ``low <= value <= high``, else ValueError naming the field and its range."""
    if not low <= value <= high:
        raise ValueError(f"{what} {text} is out of range: it must be {low}..{high:,}")
    return value


#: The byte counts a copy-size operand may name (cp.async: 4, 8 or 16; bulk copies: multiples of 16).
MAX_COPY_BYTES = (1 << 15) - 1


def check_copy_size(info, operands: tuple) -> None:
    """ValueError if the instruction's copy-size operand (cp.async ``cp-size``) is an immediate outside
    1..MAX_COPY_BYTES: the access width is stored in 16 bits and no copy is wider."""
    index = info.size_operand
    if index >= 0 and len(operands) > index and operands[index].kind == "imm":
        check_range(operands[index].value, 1, MAX_COPY_BYTES, "copy size operand", operands[index].text)


def parse_float(text: str, negative: bool) -> tuple[int | None, float]:
    """``0f3F800000`` / ``0d3FF0000000000000`` / ``1.5e3`` → (bit pattern or None, value)."""
    if text[:2] in ("0f", "0F"):
        bits = int(text[2:], 16) ^ ((1 << 31) if negative else 0)
        return bits, struct.unpack(">f", bits.to_bytes(4, "big"))[0]
    if text[:2] in ("0d", "0D"):
        bits = int(text[2:], 16) ^ ((1 << 63) if negative else 0)
        value = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
        return (bits - (1 << 64) if bits >= 1 << 63 else bits), value
    value = float(text)
    return None, -value if negative else value


def loc_record(file: str, line: str, column: str) -> Loc:
    """A ``.loc``: file index, line and column are stored as 32-bit values (``.file`` indices likewise)."""
    return Loc(check_range(parse_int(file), 0, INT32_MAX, ".loc file index", file),
               check_range(parse_int(line), 0, INT32_MAX, ".loc line", line),
               check_range(parse_int(column), 0, INT32_MAX, ".loc column", column))


def register_operand(text: str) -> Operand:
    return Operand("reg", text, None, None, None, text)


def name_operand(text: str) -> Operand:
    """A bare name: a constant (WARP_SZ), the sink `_`, or a name resolved later (reg/label/symbol)."""
    if text in PREDEFINED_CONSTANTS:
        return Operand("imm", text, PREDEFINED_CONSTANTS[text], None, None, text)
    if text == "_":
        return Operand("reg", text, None, None, None, text)
    return Operand("name", text, None, None, None, text)


def immediate_operand(literal: str, negative: bool, text: str) -> Operand:
    value = parse_int(literal)
    return Operand("imm", None, negate(value) if negative else value, None, None, text)


def float_operand(literal: str, negative: bool, text: str) -> Operand:
    bits, value = parse_float(literal, negative)
    return Operand("float", None, bits, value, None, text)


def address_operand(base: str | None, offset: int, text: str) -> Operand:
    return Operand("address", base, offset, None, None, text)


def vector_operand(elements: tuple[str, ...], text: str) -> Operand:
    return Operand("vector", None, None, None, elements, text)


def _flatten(items) -> list:
    out = []
    for item in items:
        if item is None or isinstance(item, Token):
            continue
        if isinstance(item, (list, tuple)) and not hasattr(item, "_fields"):
            out.extend(item)
        else:
            out.append(item)
    return out


class _Dimension(int):
    """Length of one array dimension (0 for ``[]``)."""


class _RegisterRange(int):
    """N of ``%r<N>``."""


class _Align(int):
    """Value of ``.align N``."""


class _Pointer(tuple):
    """(space, align) of ``.ptr .space .align N``."""


@v_args(inline=True)
class PtxTransformer(Transformer):
    """Builds records while the LALR parser reduces; ``source`` is set per parse."""

    source: str = ""

    # ------------------------------------------------------------ module level
    def start(self, *items):
        return _flatten(items)

    def version(self, number):
        return Version(str(number))

    def target(self, *names):
        return Target(tuple(str(n) for n in names))

    def address_size(self, bits):
        value = self._int(bits)
        if value not in ADDRESS_SIZES:
            raise StatementError(f".address_size {bits} is not valid: PTX defines 32 and 64", bits)
        return AddressSize(value)

    def file_directive(self, index, path, *_stamp):
        return FileDecl(self._bounded(index, 0, INT32_MAX, ".file index"), path[1:-1])

    def pragma(self, *_strings):
        return None

    def alias(self, *_names):
        return None

    def module_variable(self, declaration):
        return declaration

    def dump_line(self, line):
        return DumpLine(line.line, str(line).strip())

    def section(self, *_items):
        return None

    def section_data(self, *_values):
        return None

    def section_value(self, *_atoms):
        return None

    # ------------------------------------------------------------ declarations
    def declaration(self, *children):
        linkage = tuple(str(c)[1:] for c in children if isinstance(c, Token) and c.type == "LINKAGE")
        space_token = next(c for c in children if isinstance(c, Token) and c.type == "STATE_SPACE")
        space = str(space_token)[1:].split("::", 1)[0]
        align = next((int(c) for c in children if isinstance(c, _Align)), None)
        vector = next((VECTOR_WIDTHS[str(c)] for c in children if isinstance(c, Token) and c.type == "VECTOR"), 1)
        type_token = next((c for c in children if isinstance(c, Token) and c.type == "TYPE"), None)
        type_ = str(type_token)[1:] if type_token is not None else None
        element_bytes = TYPE_BYTES.get(type_, 0) * vector if type_ else 0
        type_name = f"v{vector}.{type_}" if type_ and vector > 1 else type_
        out = []
        for name, count, dims, initial, line in (c for c in children if isinstance(c, tuple)
                                                 and not isinstance(c, (_Pointer, Token))):
            initial_count = len(initial) if initial is not None else 0
            array = None
            if dims:
                if 0 in dims[1:]:
                    raise StatementError("only the first array dimension may be left empty", space_token)
                if dims[0] == 0:
                    # `x[] = {1, 2, 3}` takes its length from the initialiser; `.extern x[]` has none.
                    inner = math.prod(dims[1:])
                    array = initial_count // inner if initial_count else 0
                    array *= inner
                else:
                    array = math.prod(dims)
            size = element_bytes * (array if array is not None else 1)
            if size > MAX_VARIABLE_BYTES or (array or 0) > MAX_VARIABLE_BYTES:
                raise StatementError(f"{name}: {size:,} bytes is out of range: a variable may hold at most "
                                     f"{MAX_VARIABLE_BYTES:,} bytes", space_token)
            out.append(Variable(line, space, name, type_name, size,
                                align if align is not None else element_bytes, count, array, linkage, initial))
        return tuple(out)

    def declarator(self, name, *rest):
        count = next((int(r) for r in rest if isinstance(r, _RegisterRange)), 1)
        dims = tuple(int(r) for r in rest if isinstance(r, _Dimension))
        initial = next((r for r in rest if isinstance(r, list)), None)
        return (str(name), count, dims, tuple(initial) if initial is not None else None, name.line)

    def register_range(self, count):
        return _RegisterRange(self._bounded(count, 0, MAX_REGISTER_RANGE, "register count %r<N>"))

    def array_dimension(self, length=None):
        return _Dimension(self._bounded(length, 0, MAX_ARRAY_LENGTH, "array length") if length is not None else 0)

    def align(self, value):
        align = self._bounded(value, 1, MAX_ALIGN, ".align")
        if align & (align - 1):
            raise StatementError(f".align {value} is not a power of two", value)
        return _Align(align)

    def attribute(self, *_values):
        return None

    def initializer(self, value):
        return value if isinstance(value, list) else [value]

    def initial_list(self, *values):
        out = []
        for value in values:
            if value is None:
                continue
            out.extend(value if isinstance(value, list) else [value])
        return out

    def initial_scalar(self, *tokens):
        if tokens[0].type == "IDENT":           # an address (symbol, symbol+N, generic(symbol)): kept as text
            return " ".join(str(token) for token in tokens)
        literal, negative = tokens[-1], len(tokens) == 2
        if literal.type == "INT":
            value = self._int(literal)
            return -value if negative else value
        return parse_float(str(literal), negative)[1]

    # ------------------------------------------------------------ functions
    def function(self, *children):
        tokens = [c for c in children if isinstance(c, Token)]
        linkage = [str(t)[1:] for t in tokens if t.type == "LINKAGE"]
        kind = next(t for t in tokens if t.type == "FUNCTION_KIND")
        name = next(t for t in tokens if t.type == "IDENT")
        lists = [c for c in children if isinstance(c, _ParameterList)]
        returns = next((c for c in lists if c.returns), ())
        params = next((c for c in lists if not c.returns), ())
        performance = tuple(c for c in children if isinstance(c, _Performance))
        body = next((c for c in children if isinstance(c, list)), None)
        return Function(kind.line, str(name), str(kind) == ".entry", linkage[0] if linkage else None,
                        tuple(returns), tuple(params), performance, body)

    def return_list(self, *params):
        return _ParameterList((p for p in params if p is not None), returns=True)

    def parameter_list(self, *params):
        return _ParameterList((p for p in params if p is not None), returns=False)

    def parameter(self, space, *children):
        align = next((int(c) for c in children if isinstance(c, _Align)), None)
        pointer = next((c for c in children if isinstance(c, _Pointer)), None)
        vector = next((VECTOR_WIDTHS[str(c)] for c in children if isinstance(c, Token) and c.type == "VECTOR"), 1)
        type_token = next((c for c in children if isinstance(c, Token) and c.type == "TYPE"), None)
        name = next(c for c in children if isinstance(c, Token) and c.type in ("IDENT", "REG"))
        dims = [int(c) for c in children if isinstance(c, _Dimension)]
        type_ = str(type_token)[1:] if type_token is not None else None
        element_bytes = TYPE_BYTES.get(type_, 0) * vector if type_ else 0
        array = math.prod(dims) if dims else None
        if pointer is not None:
            ptr_space, align = pointer
        else:
            ptr_space = None
        return Parameter(str(name), f"v{vector}.{type_}" if type_ and vector > 1 else type_,
                         element_bytes * (array if array is not None else 1),
                         align if align is not None else element_bytes, ptr_space, array)

    def pointer(self, *children):
        space = next((str(c)[1:] for c in children if isinstance(c, Token) and c.type == "STATE_SPACE"), "generic")
        align = next(int(c) for c in children if isinstance(c, _Align))
        return _Pointer((space, align))

    def performance_directive(self, directive, *values):
        return _Performance((str(directive)[1:], tuple(self._bounded(v, 0, INT32_MAX, str(directive))
                                                       for v in values)))

    def body(self, *items):
        return _flatten(items)

    body_items = body

    def block(self, *items):
        return [OPEN_SCOPE, *_flatten(items), CLOSE_SCOPE]

    def label(self, token):
        return Label(str(token)[:-1].rstrip())

    def loc(self, file, line, column, *attributes):
        try:
            loc = loc_record(file, line, column)
            call = next((a for a in attributes if a is not None), None)
            return loc if call is None else loc._replace(call_file=loc_record(*call).file,
                                                         call_line=loc_record(*call).line)
        except ValueError as error:
            raise StatementError(str(error), file) from None

    def loc_attribute(self, name, *values):
        """None, or the (file, line, column) tokens of ``inlined_at`` (the call site of inlined code)."""
        if str(name) not in LOC_ATTRIBUTES:
            raise StatementError(f"unknown .loc attribute '{name}' (expected {' or '.join(LOC_ATTRIBUTES)})", name)
        return tuple(values) if str(name) == "inlined_at" and len(values) == 3 else None

    def callprototype(self, *_children):
        return None

    def targets(self, *_children):
        return None

    # ------------------------------------------------------------ instructions
    def instruction(self, *children):
        guard = children[0] if children[0].type == "GUARD" else None
        opcode = children[1] if guard is not None else children[0]
        semicolon = children[-1]
        operands = children[-2] if isinstance(children[-2], tuple) else ()
        try:
            info = opcode_info(str(opcode))
        except UnknownOpcode as error:
            raise StatementError(str(error), opcode) from None
        try:
            check_copy_size(info, operands)
        except ValueError as error:
            raise StatementError(str(error), opcode) from None
        first = guard if guard is not None else opcode
        text = self.source[first.start_pos:semicolon.start_pos].rstrip()
        if guard is None:
            return Instruction(opcode.line, None, False, info, operands, text)
        negated = guard[1] == "!"
        return Instruction(opcode.line, str(guard)[2 if negated else 1:], negated, info, operands, text)

    def operands(self, *operands):
        return operands

    def _span(self, first: Token, last: Token) -> str:
        return self.source[first.start_pos:last.end_pos]

    def register(self, token):
        return register_operand(str(token))

    def name(self, token):
        return name_operand(str(token))

    def pred_not(self, bang, token):
        return Operand("pred_not", str(token), None, None, None, self._span(bang, token))

    def negated(self, minus, token):
        return Operand("neg", str(token), None, None, None, self._span(minus, token))

    def register_pair(self, first, _pipe, second):
        return vector_operand((str(first), str(second)), self._span(first, second))

    def vector_predicate(self, vector, _pipe, predicate):
        """``{d0, d1, d2, d3}|p``: the vector's registers, then the predicate."""
        start = self.source.rindex("}", 0, predicate.start_pos) + 1 - len(vector.text)
        text = self.source[start:predicate.end_pos]
        return vector_operand(vector.elements + (str(predicate),), text)

    def symbol_offset(self, name, *signs_and_offset):
        offset = signs_and_offset[-1]
        value = self._int(offset)
        negative = sum(token.type == "MINUS" for token in signs_and_offset[:-1]) % 2
        return Operand("name", str(name), negate(value) if negative else value, None, None, self._span(name, offset))

    def symbol_element(self, name, _open, index, close):
        return Operand("element", str(name), self._int(index), None, None, self._span(name, close))

    def immediate(self, *tokens):
        try:
            return immediate_operand(str(tokens[-1]), len(tokens) == 2, self._span(tokens[0], tokens[-1]))
        except ValueError as error:
            raise StatementError(str(error), tokens[-1]) from None

    def floating(self, *tokens):
        return float_operand(str(tokens[-1]), len(tokens) == 2, self._span(tokens[0], tokens[-1]))

    def string(self, token):
        return Operand("string", str(token)[1:-1], None, None, None, str(token))

    def address(self, open_bracket, *children):
        if children[-1].type == "UNIFIED":
            children = children[:-1]
        close = children[-1]
        text = self._span(open_bracket, close)
        base = next((c for c in children if isinstance(c, _Base)), None)
        vector = next((c for c in children if isinstance(c, Operand)), None)
        if vector is not None:  # texture / surface: [tex, {coordinates}]
            return Operand("address", base.name, None, None, vector.elements, text)
        absolute = next((c for c in children if isinstance(c, _Absolute)), None)
        if absolute is not None:
            return address_operand(None, int(absolute), text)
        offset = 0
        tokens = [c for c in children if isinstance(c, Token) and c.type in ("PLUS", "MINUS", "INT")]
        if tokens:
            offset = self._int(tokens[-1])
            if sum(t.type == "MINUS" for t in tokens) % 2:
                offset = negate(offset)
        return address_operand(base.name, offset, text)

    def address_base(self, token):
        return _Base(str(token))

    def address_absolute(self, *tokens):
        value = self._int(tokens[-1])
        return _Absolute(negate(value) if len(tokens) == 2 else value)

    def vector(self, open_brace, *children):
        close = children[-1]
        return vector_operand(tuple(str(c) for c in children[:-1]), self._span(open_brace, close))

    def vector_immediate(self, *tokens):
        return self._span(tokens[0], tokens[-1])

    def parenthesized(self, open_paren, *children):
        close = children[-1]
        return vector_operand(tuple(c.text for c in children[:-1] if c is not None), self._span(open_paren, close))

    @staticmethod
    def _int(token: Token) -> int:
        try:
            return parse_int(str(token))
        except ValueError as error:
            raise StatementError(str(error), token) from None

    @classmethod
    def _bounded(cls, token: Token, low: int, high: int, what: str) -> int:
        try:
            return check_range(cls._int(token), low, high, what, str(token))
        except ValueError as error:
            raise StatementError(str(error), token) from None


class _ParameterList(tuple):
    def __new__(cls, params, returns: bool):
        obj = super().__new__(cls, params)
        obj.returns = returns
        return obj


class _Performance(tuple):
    """(directive name, values) of ``.maxntid 256, 1, 1`` and friends."""


class _Base(str):
    @property
    def name(self) -> str:
        return str(self)


class _Absolute(int):
    """The address of ``[1024]``."""
