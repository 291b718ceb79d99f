r"""The statement cache: the production parse path.

Compiled PTX is mostly function bodies, one statement per line, and those
statements repeat a few shapes with different registers.  This path

1. finds the function bodies (brace matching, strings skipped);
2. splits the module-level text between them into statements — line
   directives (``.version``, ``.file``, dump header lines), declarations and
   function headers up to their ';' or body — and parses each with the grammar
   (start symbol ``start``), cached by exact text; a function header is cached
   with its own name masked, because nvcc repeats the name inside parameter
   names and otherwise every header of a file would be distinct;
3. splits each body into lines and gives each line an entry of
   :class:`traceconf.ptx.bodies.Bodies` (no record per line): one dict lookup
   per line text finds the entry of every line seen before; the others are
   read in order — labels, and instructions ``[@guard] opcode operand, ...;`` whose operands
   are read one by one (:mod:`traceconf.ptx.shapes`) and cached by text —
   ``%r12`` or ``[%rd8+4]`` is read once per file, not per use;
4. hands any other body statement (``.loc``, declarations, multi-line
   instructions, inline asm blocks) to :mod:`traceconf.ptx.shapes` or to the
   grammar (start symbol ``body_items``), cached by exact text.

Everything produced here goes through the same grammar terminals and the same
transformer as the whole-file parse, so records are identical (the test suite
checks it against :func:`traceconf.ptx.parse.parse_ptx_by_grammar`); anything
this path does not recognise — in practice malformed PTX, or blanks the
grammar does not know (U+00A0, U+2028, ``\v``: Python's ``str.strip`` and
``\s`` would take them) — raises :class:`Fallback` and
:func:`traceconf.ptx.parse.parse_ptx` hands this one file to the grammar, which
reads it or reports the precise error.
"""

from __future__ import annotations

import re

from lark.exceptions import LarkError

from traceconf.ptx.bodies import EMPTY, Bodies
from traceconf.ptx.grammar import GRAMMAR_BLANKS, PtxParser
from traceconf.ptx.opcodes import UnknownOpcode, opcode_info
from traceconf.ptx.records import CLOSE_SCOPE, LINED, OPEN_SCOPE, Function, Label, Parameter
from traceconf.ptx.scan import NextOf
from traceconf.ptx.shapes import NotParsed, ShapeReader
from traceconf.ptx.transform import StatementError, check_copy_size

_BODY_OPEN = re.compile(r"\.(?:entry|func)(?![\w$])[^{;=]*\{")
_FUNCTION_KINDS = (".entry", ".func")
_BRACES = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}]')
_LINE_DIRECTIVE = re.compile(r"\.(?:version|target|address_size|file)(?![\w$])|@@DWARF")
_FUNCTION_NAME = re.compile(r"\.(?:entry|func)(?![\w$])\s*(?:\([^()]*\)\s*)?([A-Za-z_$][\w$]*)")
_MASK = "\x00"
#: Blanks of Python's ``\s`` / ``str.strip`` that the grammar does not ignore.
_FOREIGN_BLANK = re.compile("[^\\S" + re.escape(GRAMMAR_BLANKS) + "]")
_ASCII_FOREIGN_BLANKS = "\v\x1c\x1d\x1e\x1f"   # (``str.find`` is far faster than the regex)


class Fallback(Exception):
    """This path cannot vouch for the input; parse the whole file with Lark instead."""


def find_bodies(text: str) -> list[tuple[int, int]]:
    """(position of '{', position of the matching '}') of every function body."""
    bodies = []
    position = 0
    keywords = NextOf(text, _FUNCTION_KINDS)
    while True:
        start = keywords.after(position)
        if start < 0:
            return bodies
        header = _BODY_OPEN.match(text, start)
        if header is None:
            position = start + 1
            continue
        opening = header.end() - 1
        closing = _matching_brace(text, opening)
        bodies.append((opening, closing))
        position = closing + 1


def _matching_brace(text: str, opening: int) -> int:
    """Position of the '}' that closes the '{' at ``opening``."""
    depth, position = 1, opening + 1
    while True:
        closing = text.find("}", position)
        if closing < 0:
            raise Fallback("unbalanced braces")
        if text.find('"', position, closing) >= 0:
            return _matching_brace_with_strings(text, opening)
        depth += text.count("{", position, closing) - 1
        if depth == 0:
            return closing
        position = closing + 1


def _matching_brace_with_strings(text: str, opening: int) -> int:
    depth = 0
    for brace in _BRACES.finditer(text, opening):
        token = brace.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                return brace.start()
    raise Fallback("unbalanced braces")


class StatementCache:
    """Caches of one parse (operand texts, statements, opcode tokens)."""

    def __init__(self, parser: PtxParser):
        self.parser = parser
        guard, opcode = parser.terminal_regex("GUARD"), parser.terminal_regex("OPCODE")
        self.instruction = re.compile(rf"(?:({guard})\s+)?({opcode})(?:\s+([^;\s:](?:[^;]*[^;\s])?))?\s*;$")
        self.label = re.compile(parser.terminal_regex("LABEL_DEF"))
        self.dump_line = re.compile(parser.terminal_regex("DUMP_LINE"))
        self.shapes = ShapeReader(parser)
        self.operand_lists: dict = {}
        self.chunks: dict = {}
        self.lines: dict = {}
        self.headers: dict = {}
        self.body_chunks: dict = {}
        self.bodies = Bodies()
        self.open_scope, self.close_scope = self.bodies.entry([OPEN_SCOPE]), self.bodies.entry([CLOSE_SCOPE])

    # ------------------------------------------------------------ whole file
    def parse(self, text: str) -> list:
        """Module-level records of comment-blanked ``text``; function bodies are items of
        :attr:`bodies`.  Raises :class:`Fallback`."""
        if not text.isascii() or any(blank in text for blank in _ASCII_FOREIGN_BLANKS):
            found = _FOREIGN_BLANK.search(text)
            if found is not None:   # this path strips and splits with Python's notion of blanks
                raise Fallback(f"blank {found.group()!r} at {found.start()}")
        records: list = []
        position, line = 0, 1
        for opening, closing in find_bodies(text):
            module_records = self.module_statements(text[position:opening], line, header=True)
            function = module_records[-1] if module_records else None
            if type(function) is not Function or function.body != []:
                raise Fallback("a body that does not follow a function header")
            records.extend(self.bodies.compact(module_records[:-1]))
            line += text.count("\n", position, opening)
            records.append(function._replace(body=self.body(text[opening + 1:closing], line)))
            line += text.count("\n", opening, closing)
            position = closing + 1
        records.extend(self.bodies.compact(self.module_statements(text[position:], line, header=False)))
        return records

    def module_statements(self, text: str, first_line: int, header: bool) -> list:
        """Records of module-level ``text``; with ``header`` it ends with a function header
        whose body (emptied) follows."""
        out: list = []
        lines = text.split("\n")
        index, count = 0, len(lines)
        while index < count:
            statement = lines[index].strip()
            index += 1
            if not statement:
                continue
            first = index - 1
            chunk = [lines[first]]
            if not (_LINE_DIRECTIVE.match(statement) or self.dump_line.match(statement)):
                depth = statement.count("{") - statement.count("}")
                while index < count and not (depth == 0 and statement.endswith((";", "}"))):
                    statement = lines[index].strip()
                    depth += statement.count("{") - statement.count("}")
                    chunk.append(lines[index])
                    index += 1
            source = "\n".join(chunk)
            if header and index == count:
                out.extend(self._header(source + "{}", first_line + first))
            else:
                out.extend(self._chunk(source, first_line + first))
        return out

    def _header(self, source: str, line: int) -> list:
        """A function header (plus anything before it in the same statement) and an empty body."""
        name = _FUNCTION_NAME.search(source)
        if name is None or '"' in source or not _only_in_identifiers(source, name.group(1)):
            return self._chunk(source, line)
        name = name.group(1)
        key = source.replace(name, _MASK)
        template = self.headers.get(key)
        if template is not None:
            return _rebase([_mask(template, _MASK, name)], line - 1)
        try:
            records = self.shapes.read_header(source)
        except NotParsed:
            raise Fallback(source) from None
        if len(records) == 1:   # just the header: every name it holds is a function or parameter name
            self.headers[key] = _mask(records[0], name, _MASK)
        return _rebase(records, line - 1)

    # ------------------------------------------------------------ bodies
    def body(self, text: str, first_line: int) -> range:
        """Items of a body (one entry per line, see :mod:`traceconf.ptx.bodies`)."""
        lines = text.split("\n")
        # Line text (as written, and stripped) → entry: most lines repeat, so one C-level pass
        # finds almost every line's entry and only the rest (None) are read below, in order.
        cache = self.lines
        entries = list(map(cache.get, lines))
        bodies, instruction = self.bodies, self.instruction.match
        depth, index, count = 0, 0, len(lines)
        prefix = EMPTY       # labels read so far on this line, before its statement
        while True:
            try:
                index = entries.index(None, index)
            except ValueError:
                break
            raw = lines[index]
            statement = raw.strip()
            entry = cache.get(statement)
            if entry is None:
                if not statement:
                    entry = EMPTY
                elif (match := instruction(statement)) is not None:
                    entry = bodies.instruction(self._instruction(match, statement))
                elif statement[0] == "{" and statement.count(";") > 1 and statement.count("{") == statement.count("}"):
                    # a whole scope block of statements on one line (inline asm: `{ .reg .pred p; setp...; }`)
                    entry = self._body_chunk(statement)
                elif statement[0] == "{":   # a scope block, maybe with a statement on the same line
                    depth += 1
                    prefix = bodies.joined(prefix, self.open_scope)
                    if len(statement) > 1:
                        lines[index] = raw.lstrip()[1:]
                        continue
                    entries[index] = prefix
                    prefix, index = EMPTY, index + 1
                    continue
                elif statement[-1] == "}":
                    depth -= 1
                    if depth < 0:
                        raise Fallback("'}' closes more blocks than were opened")
                    inner = statement[:-1].rstrip()
                    entry = EMPTY
                    if inner:             # `cvt.u32.u64 %r1, %tmp; }` (inline asm blocks)
                        match = instruction(inner)
                        entry = bodies.instruction(self._instruction(match, inner)) if match is not None \
                            else bodies.entry(self._read_statement(inner))
                    entries[index] = bodies.joined(bodies.joined(prefix, entry), self.close_scope)
                    prefix, index = EMPTY, index + 1
                    continue
                elif (label := self.label.match(statement)) is not None:
                    rest = statement[label.end():].strip()
                    record = Label(label.group()[:-1].rstrip())
                    if rest:              # the statement after the label, same line
                        prefix = bodies.entry([record], prefix)
                        lines[index] = raw.lstrip()[label.end():]
                        continue
                    entry = bodies.entry([record])
                elif statement.startswith(".loc") or statement.endswith((";", "{", "}")):
                    entry = bodies.entry(self._read_statement(statement))
                else:                     # a statement over several lines, up to its ';'
                    first = index
                    chunk = [raw.lstrip()]   # trailing blanks belong to a multi-line statement's text
                    while not statement.endswith((";", "{", "}")) and index + 1 < count:
                        index += 1
                        statement = lines[index].strip()
                        chunk.append(lines[index])
                        entries[index] = EMPTY
                    entries[first] = bodies.joined(prefix, self._body_chunk("\n".join(chunk)))
                    prefix, index = EMPTY, index + 1
                    continue
                cache[statement] = entry
            cache[raw] = entry
            entries[index] = entry if prefix == EMPTY else bodies.joined(prefix, entry)
            prefix, index = EMPTY, index + 1
        if depth:
            raise Fallback("unclosed '{' block")
        return bodies.add_lines(entries, first_line)

    def _instruction(self, match: re.Match, statement: str) -> tuple:
        """Instruction fields after the line: guard, guard_negated, info, operands, text."""
        guard, opcode, operand_text = match.groups()
        try:
            info = opcode_info(opcode)
        except UnknownOpcode:
            raise Fallback(opcode) from None
        if operand_text is None:
            operands = ()
        else:
            operands = self.operand_lists.get(operand_text)
            if operands is None:
                try:
                    operands = self.shapes.read_list(operand_text)
                except NotParsed:
                    raise Fallback(operand_text) from None
                self.operand_lists[operand_text] = operands
        try:
            check_copy_size(info, operands)
        except ValueError:
            raise Fallback(statement) from None   # the grammar path reports it, located
        text = statement[:-1].rstrip()
        if guard is None:
            return None, False, info, operands, text
        negated = guard[1] == "!"
        return guard[2 if negated else 1:], negated, info, operands, text

    def _read_statement(self, statement: str) -> list:
        try:
            return self.shapes.read_statement(statement)
        except NotParsed:
            raise Fallback(statement) from None

    def _body_chunk(self, text: str) -> int:
        entry = self.body_chunks.get(text)
        if entry is None:
            entry = self.body_chunks[text] = self.bodies.entry(self._grammar(text, "body_items"))
        return entry

    def _chunk(self, text: str, line: int) -> list:
        records = self.chunks.get(text)
        if records is None:
            records = self.chunks[text] = self._module_statement(text)
        return _rebase(records, line - 1)

    def _module_statement(self, text: str) -> list:
        # A Lark parse costs ~0.3 ms however short the text, and nvcc writes dozens of `.file` lines.
        try:
            return self.shapes.read_module_statement(text.strip(GRAMMAR_BLANKS))
        except NotParsed:
            raise Fallback(text) from None

    def _grammar(self, text: str, start: str):
        try:
            return self.parser.parse(text, start=start)
        except (LarkError, StatementError) as error:
            raise Fallback(str(error)) from None


def _rebase(records: list, offset: int) -> list:
    if not offset:
        return records
    return [r._replace(line=r.line + offset) if isinstance(r, LINED) else r for r in records]


def _only_in_identifiers(text: str, name: str) -> bool:
    """Whether every occurrence of ``name`` lies inside an identifier (never in `.u64`, `%r1`, 16)."""
    position = text.find(name)
    while position >= 0:
        start = position
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_$"):
            start -= 1
        if text[start].isdigit() or (start > 0 and text[start - 1] in ".%"):
            return False
        position = text.find(name, position + 1)
    return True


def _mask(record: Function, old: str, new: str) -> Function:
    """``record`` with ``old`` replaced by ``new`` in every name it holds (function and parameters)."""
    def rename(params: tuple[Parameter, ...]) -> tuple[Parameter, ...]:
        return tuple(p._replace(name=p.name.replace(old, new)) for p in params)
    return record._replace(name=record.name.replace(old, new), returns=rename(record.returns),
                           params=rename(record.params), body=[] if record.body is not None else None)
