r"""Common statement shapes read without the LALR machinery (part of the fast path).

A Lark parse costs ~0.3 ms of set-up however short the text; a file has
thousands of distinct operand texts (every register, every ``[%rd8+4]``, every
label), hundreds of distinct ``.loc`` and ``.reg`` lines and dozens of ``.file`` lines.  Most of them
have one of a handful of shapes — register, name, immediate, ``[base+offset]``,
``{a, b, c, d}``, ``.loc f l c``, a one-name declaration, the module header's
``.version``/``.target``/``.address_size``/``.file`` — which one regular
expression each recognises.  The regexes are assembled from the grammar's own
terminal regexes (and its blanks, not Python's ``\s``), and the tokens they
yield go to the grammar's transformer methods, so the records are the ones Lark
would build; any other text goes to Lark, per call.

That the shapes agree with the grammar is the test suite's job
(``tests/test_ptx_parse.py``: hypothesis-generated operands and statements,
every fixture and corpus file), not something checked while parsing.
"""

from __future__ import annotations

import re

from lark import Token
from lark.exceptions import LarkError

from traceconf.ptx.grammar import GRAMMAR_BLANKS, PtxParser
from traceconf.ptx.records import Operand
from traceconf.ptx.transform import (PtxTransformer, StatementError, address_operand, float_operand,
                                     immediate_operand, loc_record, name_operand, negate, parse_int, register_operand,
                                     vector_operand)

#: One blank as the grammar's ``%ignore`` has it.
_B = "[" + re.escape(GRAMMAR_BLANKS) + "]"


class _BoundMethods:
    """Transformer methods looked up once (Lark's v_args wraps them anew on every access)."""

    def __init__(self, target):
        self._target = target

    def __getattr__(self, name):
        method = getattr(self._target, name)
        setattr(self, name, method)
        return method


class NotParsed(Exception):
    """The grammar rejects the text (the caller falls back to a whole-file parse)."""


class ShapeReader:
    """Operands and body statements of one file: by shape where one fits, else by the grammar."""

    def __init__(self, parser: PtxParser):
        self.parser = parser
        self.transformer = PtxTransformer()
        self.t = _BoundMethods(self.transformer)
        t = parser.terminal_regex
        reg, ident, int_ = t("REG"), t("IDENT"), t("INT")
        float_ = f"{t('FLOAT_HEX')}|{t('FLOAT_DEC')}"
        immediate = rf"-?{_B}*(?:{float_}|{int_})"
        element = rf"(?:{reg}|{ident}|{immediate})"
        # One alternative per shape; floats before integers, as the terminal priorities say.
        self.operand_shape = re.compile("|".join([
            rf"(?P<register>{reg})",
            rf"(?P<name>{ident})",
            rf"(?P<float>(-)?{_B}*({float_}))",
            rf"(?P<immediate>(-)?{_B}*({int_}))",
            rf"(?P<address>\[{_B}*({reg}|{ident}){_B}*(?:([+-]){_B}*(-)?{_B}*({int_}))?{_B}*\])",
            rf"(?P<absolute>\[{_B}*(-)?{_B}*({int_}){_B}*\])",
            rf"(?P<vector>\{{{_B}*{element}(?:{_B}*,{_B}*{element})*{_B}*\}})",
        ]))
        self.operand_builders = {"register": self._register, "name": self._name, "float": self._float,
                                 "immediate": self._immediate, "address": self._address,
                                 "absolute": self._absolute, "vector": self._vector}
        line_int = rf"(?:{int_})"
        self.statement_shapes = [
            (re.compile(rf"\.loc{_B}+({line_int}){_B}+({line_int}){_B}+({line_int})"), self._loc),
            (re.compile(
                rf"((?:{t('LINKAGE')}{_B}+)*)({t('STATE_SPACE')})((?:{_B}+(?:\.align{_B}+{int_}|{t('VECTOR')}|{t('TYPE')}))*)"
                rf"{_B}+({ident}|{reg})(?:{_B}*<{_B}*({int_}){_B}*>)?((?:{_B}*\[{_B}*(?:{int_})?{_B}*\])*){_B}*;"),
             self._declaration),
        ]
        # Module level: the header lines every file has, nvcc's .file table and one-name variables.
        self.module_shapes = [
            (re.compile(rf"\.file{_B}+({int_}){_B}+({t('STRING')})((?:{_B}*,{_B}*{int_})*)"), self._file),
            (re.compile(rf"\.version{_B}+({t('VERSION_NUMBER')})"), self._version),
            (re.compile(rf"\.target{_B}+({t('TARGET_NAME')}(?:{_B}*,{_B}*{t('TARGET_NAME')})*)"), self._target),
            (re.compile(rf"\.address_size{_B}+({int_})"), self._address_size),
            self.statement_shapes[1],
        ]
        # A function header with its (empty) body: linkage, kind, name, parameters with plain attributes (each read
        # by `parameter`), performance directives; a return list, `.attribute(...)`, `.pragma` ... go to the grammar.
        space, values = t("STATE_SPACE"), rf"{int_}(?:{_B}*,{_B}*{int_})*"
        self.header_shape = re.compile(
            rf"{_B}*((?:{t('LINKAGE')}{_B}+)*)({t('FUNCTION_KIND')}){_B}+({ident})(?:{_B}*\(([^()]*)\))?"
            rf"((?:{_B}+{t('PERFORMANCE_DIRECTIVE')}(?:{_B}+{values})?)*){_B}*\{{{_B}*\}}{_B}*")
        self.parameter = re.compile(
            rf"({space})((?:{_B}+(?:\.ptr(?:{_B}+{space})?{_B}+\.align{_B}+{int_}|\.align{_B}+{int_}|{t('VECTOR')}"
            rf"|{t('TYPE')}))*){_B}+(?:({ident})|({reg}))((?:{_B}*\[{_B}*(?:{int_})?{_B}*\])*)")
        self.parameter_attribute = re.compile(
            rf"\.ptr(?:{_B}+({space}))?{_B}+\.align{_B}+({int_})|\.align{_B}+({int_})|({t('VECTOR')})|({t('TYPE')})")
        self.performance = re.compile(rf"({t('PERFORMANCE_DIRECTIVE')})(?:{_B}+({values}))?")
        self.target_separator = re.compile(rf"{_B}*,{_B}*")
        self.attribute = re.compile(rf"\.align{_B}+({int_})|({t('VECTOR')})|({t('TYPE')})")
        self.dimension = re.compile(rf"\[{_B}*({int_})?{_B}*\]")
        self.linkage = re.compile(t("LINKAGE"))
        self.cache: dict[str, Operand] = {}
        # Operand list pieces: vectors and addresses may hold commas, nothing else may.
        self.comma = re.compile(rf"{_B}*,{_B}*")
        self.piece = re.compile(_B + r"*((?:\{[^{}]*\}|\[[^\[\]]*\]|[^,{}\[\]()\"])+?)" + _B + r"*(,|$)")

    def read_list(self, text: str) -> tuple[Operand, ...]:
        """Operands of ``op, op, ...`` (the text between an opcode and its ';')."""
        if "{" not in text and "(" not in text and '"' not in text:
            pieces = self.comma.split(text.strip(GRAMMAR_BLANKS))
            if "" in pieces:
                return self._lark(text, "operands")    # `a,,b` or a trailing comma
            operands = tuple(map(self.cache.get, pieces))
            return operands if None not in operands else self._read_pieces(pieces)
        pieces, position, end = [], 0, len(text)
        while position < end:
            match = self.piece.match(text, position)
            if match is None:
                return self._lark(text, "operands")
            pieces.append(match.group(1))
            position = match.end()
            if match.group(2) == "," and position == end:
                return self._lark(text, "operands")   # trailing comma: let the grammar complain
        return self._read_pieces(pieces)

    def _read_pieces(self, pieces: list[str]) -> tuple[Operand, ...]:
        cache, read = self.cache, self.read
        out = []
        for piece in pieces:
            operand = cache.get(piece)
            if operand is None:
                operand = cache[piece] = read(piece)
            out.append(operand)
        return tuple(out)

    def read(self, text: str) -> Operand:
        """One operand."""
        match = self.operand_shape.fullmatch(text)
        if match is None:
            return self._lark(text, "operand")
        try:
            return self.operand_builders[match.lastgroup](match)
        except ValueError:          # e.g. an octal literal with an 8: the grammar reports it
            raise NotParsed(text) from None

    def read_statement(self, text: str) -> list:
        """Records of one body statement (``.loc 1 5 2``, ``.reg .b32 %r<9>;`` or any other)."""
        return self._read(text, self.statement_shapes, "body_items")

    def read_module_statement(self, text: str) -> list:
        """Records of one module-level statement (``.file``, ``.version``, a declaration ...); ``text`` holds
        no blanks at either end."""
        return self._read(text, self.module_shapes, "start")

    def read_header(self, text: str) -> list:
        """Records of a function header followed by an empty body ``{}`` (the statement cache reads bodies
        itself): by shape, else by the grammar."""
        match = self.header_shape.fullmatch(text)
        parameters = self._parameters(match.group(4)) if match is not None else None
        if parameters is None:
            return self._lark(text, "start")
        self.transformer.source = text
        try:
            return self._header(match, parameters)
        except (ValueError, StatementError):
            raise NotParsed(text) from None

    def _parameters(self, text: str | None) -> list[re.Match] | None:
        """The ``parameter`` match of each parameter of a list's text (None: no list), or None where one does not
        fit the shape."""
        if text is None or not text.strip(GRAMMAR_BLANKS):
            return []
        matches = [self.parameter.fullmatch(piece) for piece in self.comma.split(text.strip(GRAMMAR_BLANKS))]
        return None if None in matches else matches

    def _read(self, text: str, shapes: list, start: str):
        for regex, build in shapes:
            match = regex.fullmatch(text)
            if match is None:
                continue
            self.transformer.source = text
            try:
                return build(match)
            except (ValueError, StatementError):
                raise NotParsed(text) from None
        return self._lark(text, start)

    def _lark(self, text: str, start: str):
        try:
            return self.parser.parse(text, start=start)
        except (LarkError, StatementError) as error:
            raise NotParsed(str(error)) from None

    # ------------------------------------------------------------ shapes
    @staticmethod
    def _token(match: re.Match, group: int, type_: str) -> Token:
        return Token(type_, match.group(group), start_pos=match.start(group), end_pos=match.end(group),
                     line=1, column=match.start(group) + 1)

    @staticmethod
    def _loc(match):
        return [loc_record(*match.groups())]

    def _file(self, match):
        return [self.t.file_directive(self._token(match, 1, "INT"), Token("STRING", match.group(2)))]

    def _version(self, match):
        return [self.t.version(Token("VERSION_NUMBER", match.group(1)))]

    def _target(self, match):
        return [self.t.target(*(Token("TARGET_NAME", name) for name in self.target_separator.split(match.group(1))))]

    def _address_size(self, match):
        return [self.t.address_size(self._token(match, 1, "INT"))]

    def _declaration(self, match):
        t = self.t
        children = [Token("LINKAGE", m.group()) for m in self.linkage.finditer(match.group(1))]
        children.append(self._token(match, 2, "STATE_SPACE"))
        for attribute in self.attribute.finditer(match.group(3)):
            align, vector, type_ = attribute.groups()
            if align is not None:
                children.append(t.align(Token("INT", align)))
            else:
                children.append(Token("VECTOR", vector) if vector is not None else Token("TYPE", type_))
        rest = []
        if match.group(5) is not None:
            rest.append(t.register_range(Token("INT", match.group(5))))
        for dimension in self.dimension.finditer(match.group(6)):
            length = dimension.group(1)
            rest.append(t.array_dimension(Token("INT", length)) if length is not None else t.array_dimension())
        children.append(t.declarator(self._token(match, 4, "IDENT"), *rest))
        return list(t.declaration(*children))

    def _header(self, match, parameters: list[re.Match]):
        t = self.t
        linkage, kind, name, listed, performance = match.groups()
        children = [Token("LINKAGE", m.group()) for m in self.linkage.finditer(linkage)]
        children.append(Token("FUNCTION_KIND", kind, line=match.string.count("\n", 0, match.start(2)) + 1))
        children.append(Token("IDENT", name))
        if listed is not None:
            children.append(t.parameter_list(*map(self._parameter, parameters)))
        for directive in self.performance.finditer(performance):
            numbers = self.comma.split(directive.group(2)) if directive.group(2) is not None else []
            children.append(t.performance_directive(Token("PERFORMANCE_DIRECTIVE", directive.group(1)),
                                                    *(Token("INT", number) for number in numbers)))
        children.append(t.body())
        return t.start(t.function(*children))

    def _parameter(self, match):
        t = self.t
        space, attributes, ident, reg, dimensions = match.groups()
        children = []
        for attribute in self.parameter_attribute.finditer(attributes):
            pointer_space, pointer_align, align, vector, type_ = attribute.groups()
            if pointer_align is not None:
                space_token = () if pointer_space is None else (Token("STATE_SPACE", pointer_space),)
                children.append(t.pointer(*space_token, t.align(Token("INT", pointer_align))))
            elif align is not None:
                children.append(t.align(Token("INT", align)))
            else:
                children.append(Token("VECTOR", vector) if vector is not None else Token("TYPE", type_))
        children.append(Token("IDENT", ident) if ident is not None else Token("REG", reg))
        for dimension in self.dimension.finditer(dimensions):
            length = dimension.group(1)
            children.append(t.array_dimension(Token("INT", length)) if length is not None else t.array_dimension())
        return t.parameter(Token("STATE_SPACE", space), *children)

    @staticmethod
    def _register(match):
        return register_operand(match.group())

    @staticmethod
    def _name(match):
        return name_operand(match.group())

    @staticmethod
    def _float(match):
        index = match.re.groupindex["float"]
        return float_operand(match.group(index + 2), match.group(index + 1) is not None, match.group())

    @staticmethod
    def _immediate(match):
        index = match.re.groupindex["immediate"]
        return immediate_operand(match.group(index + 2), match.group(index + 1) is not None, match.group())

    @staticmethod
    def _address(match):
        index = match.re.groupindex["address"]
        base, sign, minus, digits = match.group(index + 1, index + 2, index + 3, index + 4)
        offset = 0
        if digits is not None:
            offset = parse_int(digits)
            if (sign == "-") != (minus is not None):
                offset = negate(offset)
        return address_operand(base, offset, match.group())

    @staticmethod
    def _absolute(match):
        index = match.re.groupindex["absolute"]
        value = parse_int(match.group(index + 2))
        return address_operand(None, negate(value) if match.group(index + 1) else value, match.group())

    @staticmethod
    def _vector(match):
        text = match.group()
        return vector_operand(tuple(e.strip(GRAMMAR_BLANKS) for e in text[1:-1].split(",")), text)
