"""The container checks before the NVIDIA tools (traceconf.sass.containers): a cubin, fatbin or host ELF whose
tables point past its end is refused in one line naming the user's file and the table, and no tool starts."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from traceconf.errors import InputError
from traceconf.sass import toolchain
from traceconf.sass.binary import load_binary
from traceconf.sass.containers import check_container

SASS = Path(__file__).resolve().parent / "data" / "sass"
CUBIN = (SASS / "matmul.sm_90.cubin").read_bytes()
FATBIN = (SASS / "transpose.sm_90.fatbin").read_bytes()


def _set(data: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


@pytest.mark.parametrize("data", [CUBIN, FATBIN, (SASS / "transpose.sm_90.cubin").read_bytes(),
                                  Path(sys.executable).resolve().read_bytes()],
                         ids=["cubin", "fatbin", "cubin-2", "host-executable"])
def test_whole_binaries_pass(data):
    check_container(data, "k.bin")


SHOFF = struct.unpack_from("<Q", CUBIN, 40)[0]
DAMAGED = [
    ("truncated-header", CUBIN[:40], "shorter than an ELF header"),
    ("class", _set(CUBIN, 4, "B", 7), "ELF class 7"),
    ("section-table-past-end", _set(CUBIN, 40, "<Q", len(CUBIN) - 10), "section header table"),
    ("section-entry-size", _set(CUBIN, 58, "<H", 8), "section header table entries of 8 bytes"),
    ("names-index", _set(CUBIN, 62, "<H", 200), "section-name table index 200"),
    ("section-past-end", _set(CUBIN, SHOFF + 64 * 2 + 32, "<Q", 1 << 40), "section 2"),
    ("program-table-past-end", _set(CUBIN, 32, "<Q", 2**64 - 8), "program header table"),
    ("truncated-cubin", CUBIN[:SHOFF + 100], "ends past the end of the file"),
    ("fatbin-size", _set(FATBIN, 8, "<Q", 1 << 33), "announces 8589934592 bytes"),
    ("fatbin-entry", _set(FATBIN, 16 + 8, "<Q", 1 << 20), "fatbin entry 0"),
    ("fatbin-entry-header", _set(FATBIN, 16 + 4, "<I", 3), "fatbin entry 0 (3-byte header"),
    ("fatbin-truncated", FATBIN[:len(FATBIN) // 2], "the file has"),
]


@pytest.mark.parametrize("data, expected", [(d, e) for _, d, e in DAMAGED], ids=[n for n, _, _ in DAMAGED])
def test_damaged_tables_are_named_in_one_line(data, expected):
    with pytest.raises(InputError) as caught:
        check_container(data, "user/k.cubin")
    text = str(caught.value)
    assert text.startswith("user/k.cubin: damaged binary: ") and expected in text and "\n" not in text


def test_load_binary_refuses_before_any_tool_starts(tmp_path, monkeypatch):
    """Found by scripts/fuzz_surfaces.py (elf): the tools named a temporary file or printed nothing."""
    monkeypatch.setenv("TRACECONF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(toolchain, "_disassemble", lambda *a: pytest.fail("a tool ran on a damaged binary"))
    path = tmp_path / "k.cubin"
    path.write_bytes(_set(CUBIN, 40, "<Q", 2**63))
    with pytest.raises(InputError, match=rf"^{path}: damaged binary: section header table"):
        load_binary(path)
