"""Malformed PTX: one human line ``FILE:LINE:COL: message``, the line and a caret, exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from traceconf.errors import InputError
from traceconf.ptx import parse_file, parse_ptx
from traceconf.ptx.parse import parse_ptx_by_grammar

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"   # lines 1-3


def error_of(source: str | bytes) -> InputError:
    with pytest.raises(InputError) as caught:
        parse_ptx(source, "bad.ptx")
    # the grammar is the definition: the production path reports exactly its error
    with pytest.raises(InputError) as plain:
        parse_ptx_by_grammar(source, "bad.ptx")
    assert str(plain.value) == str(caught.value) and plain.value.source_line == caught.value.source_line
    return caught.value


def located(error: InputError) -> tuple[int | None, int | None, str]:
    return error.line, error.column, error.message


CASES = [
    ("truncated inside a body",
     HEADER + ".visible .entry k(.param .u64 p)\n{\n\t.reg .b32 %r<4>;\n\tld.shared.u32 %r1, [%r2];\n\tadd.s32 %r1",
     (8, 13, "unexpected end of file: the body of 'k' opened at line 5 is missing its closing '}'")),
    ("truncated after a complete statement",
     HEADER + ".visible .entry kern()\n{\n\tret;\n",
     (6, 6, "unexpected end of file: the body of 'kern' opened at line 5 is missing its closing '}'")),
    ("missing semicolon",
     HEADER + ".entry k()\n{\n\tld.shared.u32 %r1, [%r2]\n\tadd.s32 %r1, %r1, 1;\n}\n",
     (6, 26, "expected ';' after instruction")),
    ("missing semicolon after a declaration",
     HEADER + ".entry k()\n{\n\t.reg .b32 %r<4>\n\tret;\n}\n",
     (6, 17, "expected ';' after declaration")),
    ("unknown directive in a body", HEADER + ".entry k()\n{\n\t.foo 3;\n}\n", (6, 2, "unknown directive '.foo'")),
    ("unknown directive at module level", HEADER + ".frobnicate sm_90\n", (4, 1, "unknown directive '.frobnicate'")),
    ("misplaced directive", HEADER + ".entry k()\n{\n\t.version 8.0\n}\n",
     (6, 2, "directive '.version' is not allowed here")),
    ("unknown instruction", HEADER + ".entry k()\n{\n\tlds.shared.u32 %r1, [%r2];\n}\n",
     (6, 2, "unknown instruction 'lds' (did you mean 'ld'?)")),
    ("bad operand", HEADER + ".entry k()\n{\n\tld.shared.u32 %r1, [%r2+];\n}\n",
     (6, 26, "expected an operand (register, constant, [address] or {vector}), found ']'")),
    ("instruction outside a function", HEADER + "add.s32 %r1, %r1, 1;\n",
     (4, 1, "instruction 'add.s32' outside a function body")),
    ("unterminated comment", HEADER + "/* never closed\n.entry k()\n{\n}\n", (4, 1, "unterminated /* comment")),
    ("unterminated string", HEADER + '.pragma "abc;\n', (4, 9, "unterminated string (missing closing '\"')")),
    ("bad octal constant", HEADER + ".entry k()\n{\n\tmov.u32 %r1, 09;\n}\n",
     (6, 15, "invalid integer constant '09' (a leading 0 means octal)")),
    ("unknown .loc attribute", HEADER + ".entry k()\n{\n\t.loc 1 2 3, colour 1 2 3\n\tret;\n}\n",
     (6, 14, "unknown .loc attribute 'colour' (expected function_name or inlined_at)")),
    # Blanks that Python's str.strip()/\s take but the grammar does not (fuzz findings).
    ("U+2028 inside an address", HEADER + ".entry k()\n{\n\tld.shared.u32 %r1, [\u2028%r2];\n\tret;\n}\n",
     (6, 22, "unexpected character '\\u2028' (not PTX text)")),
    ("U+2028 before ']'", HEADER + ".entry k()\n{\n\tld.shared.u32 %r1, [%r2+4\u2028];\n\tret;\n}\n",
     (6, 27, "unexpected character '\\u2028' (not PTX text)")),
    ("U+00A0 inside a parameter name", HEADER + ".visible .entry k(.param .u64 ou\u00a0tput)\n{\n\tret;\n}\n",
     (4, 33, "unexpected character '\\xa0' (not PTX text)")),
    ("U+00A0 after a statement", HEADER + ".entry k()\n{\n\tret;\u00a0\n}\n",
     (6, 6, "unexpected character '\\xa0' (not PTX text)")),
    ("vertical tab between operands", HEADER + ".entry k()\n{\n\tmov.u32 %r1,\v%r2;\n}\n",
     (6, 14, "unexpected character '\\x0b' (not PTX text)")),
]


@pytest.mark.parametrize("name,source,expected", CASES, ids=[c[0] for c in CASES])
def test_error_messages(name, source, expected):
    error = error_of(source)
    assert located(error) == expected
    assert error.file == "bad.ptx"
    assert "\t" not in error.source_line       # tabs become spaces so the caret lines up
    assert str(error).startswith(f"bad.ptx:{expected[0]}:{expected[1]}: ")


def test_empty_and_comment_only_files():
    assert error_of(b"").message == "empty file: no PTX to parse"
    assert error_of("  \n\n\t").message == "empty file: no PTX to parse"
    assert error_of("// only\n/* comments */\n").message == "no PTX statements (the file holds only comments)"
    assert error_of("").line is None


def test_binary_garbage_and_encodings():
    nul = error_of(b".version 8.0\n\x00\x01\x02binary")
    assert (nul.line, nul.column) == (2, 1) and "binary data (NUL byte at offset 13)" in nul.message
    latin1 = error_of(b".version 8.0\n// caf\xe9\n")
    assert (latin1.line, latin1.column) == (2, 7) and latin1.message.startswith("invalid UTF-8 byte 0xe9")
    assert latin1.source_line == "// caf\ufffd"
    noise = error_of(bytes(range(128, 256)) * 2)   # binary without NULs: no screenful of it echoed back
    assert noise.message.startswith("invalid UTF-8 byte 0x80") and noise.source_line is None
    elf = error_of(b"\x7fELF\x02\x01\x01\x00")
    assert "ELF binary" in elf.message and elf.line is None
    control = error_of(HEADER + "\x07\n")
    assert (control.line, control.message) == (4, "unexpected character '\\x07' (not PTX text)")


def test_unreadable_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        parse_file(tmp_path / "missing.ptx")


def run_cli(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from traceconf.cli import main; main()", *arguments],
                          capture_output=True, text=True, timeout=120)


def test_cli_reports_one_line_and_exits_2(tmp_path):
    path = tmp_path / "trunc.ptx"
    path.write_text(CASES[0][1])
    result = run_cli("parse", str(path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stdout == ""
    first, source, caret = result.stderr.splitlines()
    assert first == f"{path}:8:13: unexpected end of file: the body of 'k' opened at line 5 is missing its closing '}}'"
    assert source.strip() == "add.s32 %r1" and caret.index("^") == 4 + 12


def test_cli_binary_file(tmp_path):
    path = tmp_path / "random.ptx"
    path.write_bytes(bytes(range(256)) * 4)
    result = run_cli("parse", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"{path}:1:1: binary data (NUL byte at offset 0)")
