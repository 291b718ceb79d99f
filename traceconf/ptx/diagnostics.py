"""Turns Lark's parse errors into one human line (``FILE:LINE:COL: message``).

Lark reports the token it could not use and the set of terminals it expected;
users want "expected ';' after instruction" at the end of the line that lacks
it, "unknown directive '.foo'", or which function body a truncated file left
open.  Everything here runs only on the error path.
"""

from __future__ import annotations

import re

from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from traceconf.errors import InputError

#: Directives of PTX ISA 9.x ("Directives" chapter) plus type/space keywords.
KNOWN_DIRECTIVES = frozenset("""
    .version .target .address_size .file .loc .section .pragma .alias .entry .func .callprototype
    .calltargets .branchtargets .maxntid .reqntid .minnctapersm .maxnctapersm .maxnreg .noreturn
    .explicitcluster .reqnctapercluster .maxclusterrank .blocksareclusters .visible .extern .weak .common
    .reg .sreg .const .global .local .param .shared .tex .align .ptr .attribute
""".split())

#: How terminals read in a message.
TERMINAL_NAMES = {
    "SEMICOLON": "';'", "COMMA": "','", "LBRACE": "'{'", "RBRACE": "'}'", "LSQB": "'['", "RSQB": "']'",
    "LPAR": "'('", "RPAR": "')'", "PLUS": "'+'", "MINUS": "'-'", "COLON": "':'", "EQUAL": "'='",
    "LESSTHAN": "'<'", "MORETHAN": "'>'", "BANG": "'!'", "PIPE": "'|'",
    "OPCODE": "an instruction", "LABEL_DEF": "a label", "GUARD": "a guard predicate",
    "REG": "a register", "IDENT": "a name", "INT": "an integer", "FLOAT_HEX": "a float constant",
    "FLOAT_DEC": "a float constant", "STRING": "a string", "TYPE": "a type (.b32, .f32, ...)",
    "STATE_SPACE": "a state space (.reg, .shared, ...)", "VECTOR": "a vector width (.v2/.v4)",
    "LINKAGE": "a linkage directive", "FUNCTION_KIND": "'.entry' or '.func'", "TARGET_NAME": "a target name",
    "VERSION_NUMBER": "a version number", "PERFORMANCE_DIRECTIVE": "a performance directive",
    "SECTION_NAME": "a section name", "DUMP_LINE": "a cuobjdump header line", "DWARF_LINE": "'@@DWARF'",
    "ATTRIBUTE_NAME": "an attribute", "TARGETS_DIRECTIVE": "'.branchtargets' or '.calltargets'",
    "$END": "end of file",
}
OPERAND_TERMINALS = {"REG", "IDENT", "INT", "FLOAT_HEX", "FLOAT_DEC", "LSQB", "LBRACE", "LPAR", "MINUS", "BANG",
                     "STRING"}
_FUNCTION_HEADER = re.compile(r"\.(?:entry|func)(?![\w$])[^{;=]*?([A-Za-z_$][\w$]*)\s*(?:\([^{;]*)?\{")
#: The word at an error position; any one character (a blank the grammar does not ignore too).
_WORD = re.compile(r"\.?[A-Za-z_$%@][\w$.:]*|.", re.DOTALL)


def _line_of(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _source_line(text: str, line: int) -> str:
    lines = text.split("\n")
    if not 0 < line <= len(lines):
        return ""
    # Tabs become single spaces so that the caret printed under the line lines up; other
    # unprintable characters (U+2028 would end the line on a terminal) show as U+FFFD.
    source = lines[line - 1].replace("\t", " ")
    return source if source.isprintable() else "".join(c if c.isprintable() else "\ufffd" for c in source)


def error_at(message: str, filename: str, text: str, pos: int) -> InputError:
    line, column = _line_of(text, pos)
    return InputError(message, filename, line, column, _source_line(text, line))


def _describe(expected) -> str:
    names = sorted({TERMINAL_NAMES.get(e, f"'{e.strip(chr(34))}'" if e.startswith('"') else e.lower())
                    for e in expected if not e.startswith("__")})
    if not names:
        return ""
    if len(names) > 6:
        names = names[:6] + ["..."]
    return "; expected " + (names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1])


def _unclosed_brace(text: str) -> int | None:
    """Position of the last '{' that is never closed (strings skipped), or None."""
    stack = []
    for match in re.finditer(r'"(?:[^"\\\n]|\\.)*"|[{}]', text):
        if match.group() == "{":
            stack.append(match.start())
        elif match.group() == "}" and stack:
            stack.pop()
    return stack[-1] if stack else None


def _end_of_previous_token(text: str, pos: int) -> int:
    end = pos
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


def _statement_kind(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    stripped = re.sub(r"^\s*(?:[A-Za-z_$%][\w$]*\s*:(?!:))?\s*", "", text[start:pos])
    return "declaration" if stripped.startswith(".") else "instruction"


def translate(error: UnexpectedInput, filename: str, text: str) -> InputError:
    """The InputError users see for a Lark parse error on ``text`` (comment-blanked source)."""
    if isinstance(error, UnexpectedEOF) or (isinstance(error, UnexpectedToken) and error.token.type == "$END"):
        return _end_of_file(error, filename, text)
    if isinstance(error, UnexpectedToken):
        pos, expected = error.token.start_pos, set(error.expected)
    else:
        assert isinstance(error, UnexpectedCharacters)
        pos, expected = error.pos_in_stream, set(error.allowed or ())
    return _unexpected(_WORD.match(text, pos).group(), pos, expected, filename, text)


def _unexpected(found: str, pos: int, expected: set, filename: str, text: str) -> InputError:
    if not found.isprintable():     # a control character, U+00A0, U+2028...: say which
        return error_at(f"unexpected character {found!r} (not PTX text)", filename, text, pos)
    previous_end = _end_of_previous_token(text, pos)
    on_new_line = "\n" in text[previous_end:pos]
    # after '{', '}', ';' or a label a new statement starts: a ';' there is not what is missing
    statement_start = previous_end == 0 or text[previous_end - 1] in "{};:"
    if "SEMICOLON" in expected and not statement_start and (on_new_line or not (expected & OPERAND_TERMINALS)):
        where = previous_end if on_new_line else pos
        kind = _statement_kind(text, previous_end)
        return error_at(f"expected ';' after {kind}" + ("" if on_new_line else f", found '{found}'"),
                        filename, text, where)
    if found.startswith('"'):
        return error_at("unterminated string (missing closing '\"')", filename, text, pos)
    if re.fullmatch(r"\.[A-Za-z_][\w$]*(?:::\w+)?", found):
        if found.split("::")[0] not in KNOWN_DIRECTIVES:
            return error_at(f"unknown directive '{found}'", filename, text, pos)
        return error_at(f"directive '{found}' is not allowed here", filename, text, pos)
    if expected and expected <= OPERAND_TERMINALS | {"RSQB", "RBRACE", "RPAR", "COMMA"} and \
            expected & OPERAND_TERMINALS:
        return error_at(f"expected an operand (register, constant, [address] or {{vector}}), found '{found}'",
                        filename, text, pos)
    if "OPCODE" not in expected and re.fullmatch(r"[a-z][a-z0-9_]*(?:\.[\w:]+)+", found) and \
            _unclosed_brace(text[:pos]) is None:
        return error_at(f"instruction '{found}' outside a function body", filename, text, pos)
    return error_at(f"unexpected '{found}'{_describe(expected)}", filename, text, pos)


def _end_of_file(error: UnexpectedInput, filename: str, text: str) -> InputError:
    end = _end_of_previous_token(text, len(text))
    expected = set(getattr(error, "expected", ()) or ())
    opened = _unclosed_brace(text)
    if opened is not None:
        line, _ = _line_of(text, opened)
        header = None
        for match in _FUNCTION_HEADER.finditer(text, 0, opened + 1):
            if match.end() - 1 == opened:
                header = match.group(1)
        what = f"the body of '{header}'" if header else "the '{' block"
        return error_at(f"unexpected end of file: {what} opened at line {line} is missing its closing '}}'",
                        filename, text, end)
    if "SEMICOLON" in expected:
        return error_at(f"unexpected end of file: expected ';' after {_statement_kind(text, end)}",
                        filename, text, end)
    return error_at(f"unexpected end of file{_describe(expected)}", filename, text, end)
