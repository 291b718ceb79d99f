"""The SASS opcode table (traceconf/sass/opcodes.py) is the one home of SASS opcode facts, and its derived
predicates agree with each other where the former per-module tables did not."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import traceconf
from traceconf.emulate import Launch
from traceconf.sass import opcodes, semantics
from traceconf.sass.emulate import emulate_sass
from traceconf.sass.listing import parse_text
from traceconf.sass.opcodes import OPCODES, global_op, opcode_of, shared_op, uncounted_op, writes_memory

PACKAGE = Path(traceconf.__file__).parent
TABLE_MODULE = PACKAGE / "sass" / "opcodes.py"


def _mnemonic_literals(node: ast.AST) -> list[str]:
    values = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
    return [v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)
            and v.value in OPCODES]


def _mnemonic_facts(path: Path) -> list[str]:
    """Places in a module that state a fact about SASS mnemonics: a literal set/tuple/list/dict naming two or
    more of them, or a comparison of a value with one (``family == "BRA"``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.Set, ast.Tuple, ast.List, ast.Dict)) and len(_mnemonic_literals(node)) >= 2:
            found.append(f"{path.name}:{node.lineno}: {_mnemonic_literals(node)}")
        if isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators):
                if isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant) and right.value in OPCODES:
                    found.append(f"{path.name}:{node.lineno}: == {right.value!r}")
    return found


def test_no_module_but_the_table_holds_sass_mnemonic_facts():
    offenders = [place for path in sorted(PACKAGE.rglob("*.py")) if path != TABLE_MODULE
                 for place in _mnemonic_facts(path)]
    assert offenders == []


def test_the_scan_finds_a_mnemonic_set(tmp_path):
    """The scan above can fail: a module holding its own set of SASS opcodes is caught."""
    module = tmp_path / "m.py"
    module.write_text('NO_OPS = frozenset({"NOP", "BSSY"})\nif family == "BRA":\n    pass\n')
    assert len(_mnemonic_facts(module)) == 2


def test_table_rows_are_mnemonics_and_every_handler_exists():
    for name, entry in OPCODES.items():
        assert name.isupper() and "." not in name, name
        if entry.role in ("int", "float", "warp") and entry.detail is not None:
            assert entry.detail in semantics.HANDLERS, name
    # names that are no SASS mnemonic (a PTX-ish spelling, an opcode with its modifier) are not in the table
    for not_sass in ("LDC_LOAD", "ATOMG_CAS", "RED_G", "ELECT_NOOP", "HADD2_F32"):
        assert opcode_of(not_sass) is None


def test_a_bad_table_line_is_refused():
    with pytest.raises(ValueError, match="line 2: FOO: role 'weird'"):
        opcodes._parse("# header\nFOO weird -\n")
    with pytest.raises(ValueError, match="transfer 'jump'"):
        opcodes._parse("BAR2 control jump\n")
    with pytest.raises(ValueError, match="listed twice"):
        opcodes._parse("NOP nop -\nNOP nop -\n")


@pytest.mark.parametrize("mnemonic", ["HGMMA", "IGMMA", "QGMMA", "BGMMA"])
def test_every_wgmma_flavour_is_uncounted_shared_work(mnemonic):
    assert uncounted_op(f"{mnemonic}.64x64x32.F32") == ("wgmma", opcodes.UNCOUNTED["wgmma"])


@pytest.mark.parametrize("mnemonic", ["UTMALDG", "UTMASTG", "UTMAREDG", "UBLKCP", "UBLKRED"])
def test_every_tma_copy_is_uncounted_and_emulated_alike(mnemonic):
    assert uncounted_op(f"{mnemonic}.2D") == ("tma", opcodes.UNCOUNTED["tma"])
    assert opcodes.has_no_effect(mnemonic)


def test_prefetches_touch_no_shared_memory():
    for mnemonic in ("UTMAPF", "UBLKPF"):
        assert uncounted_op(mnemonic) is None and opcodes.has_no_effect(mnemonic)


def test_memory_predicates_follow_the_table():
    assert shared_op("LDS.U.128").bytes == 16 and shared_op("LDS.U.128").space == opcodes.ALWAYS
    assert shared_op("RED.E.ADD").space == opcodes.IN_WINDOW and global_op("RED.E.ADD").result is False
    assert global_op("ATOMG.E.CAS.STRONG.GPU").op == "cas" and global_op("ATOMG.E.ADD").result
    assert global_op("LDGSTS.E.128") is None and shared_op("LDGSTS.E.128").kind == "cp_async"
    assert shared_op("LDG.E") is None and global_op("LDS") is None
    for store in ("STS", "STG.E", "ST.E.64", "ATOMS.ADD", "REDG.E.ADD", "STL", "SUST.D", "UTMAREDG", "UTMASTG"):
        assert writes_memory(store), store
    for load in ("LDS", "LDG.E", "LDL", "TEX", "HGMMA", "BRA"):
        assert not writes_memory(load), load
    assert opcodes.reads_into_registers("LDL") and opcodes.reads_into_registers("SUATOM")
    assert opcodes.reads_into_registers("STL") is False and opcodes.reads_into_registers("RED") is False
    assert opcodes.reads_into_registers("IADD3") is None


def test_control_transfers():
    assert {m: opcodes.transfer(m) for m in ("BRA", "BRX", "BRXU", "JMXU", "CALL", "RET", "SYNC", "BSSY", "LDS")} == \
        {"BRA": "branch", "BRX": "indirect", "BRXU": "indirect", "JMXU": "indirect", "CALL": "call",
         "RET": "return", "SYNC": "reconverge", "BSSY": "mark", "LDS": None}
    assert opcodes.RECONVERGE_JUMPS == {"SYNC": "SSY", "BRK": "PBK", "CONT": "PCNT"}


def _listing(body: list[str], arch: str = "sm_90") -> str:
    lines = [f"\tcode for {arch}", "\t\tFunction : k"]
    for index, text in enumerate(body + ["EXIT ;"]):
        lines.append(f"        /*{index * 16:04x}*/                   {text.rstrip(';')} ;")
    return "\n".join(lines) + "\n"


def _notes(body: list[str]) -> list[str]:
    module = parse_text(_listing(body), "t.sass")
    return emulate_sass(module, "k", Launch(block=(32, 1, 1), grid=(1, 1, 1))).notes


def test_utmaredg_is_a_silent_tma_copy_like_its_siblings():
    """UTMAREDG used to be 'not modelled' (results unknown, a note) while UTMASTG was a silent no-op."""
    tid = "S2R R0, SR_TID.X"
    for copy in ("UTMAREDG.2D.ADD [UR8], [UR4]", "UTMASTG.2D [UR8], [UR4]", "UBLKRED.G.S.ADD [UR4], [UR6], UR8"):
        notes = _notes([tid, copy, "STS [R0.X4], RZ"])
        assert not any("not modelled" in note for note in notes), notes
        assert any(copy.split(".")[0] in note and "not counted" in note for note in notes), notes


def test_an_opcode_absent_from_the_table_is_named_as_not_modelled():
    notes = _notes(["S2R R0, SR_TID.X", "@P0 ELECT P1, URZ, PT", "STS [R0.X4], RZ"])
    assert any("ELECT" in note and "not modelled" in note for note in notes)


def test_a_handler_bug_surfaces_as_an_exception_not_a_note(monkeypatch):
    """A handler that raises is a bug of ours: it must not become a 'not modelled' note (issue 19)."""
    def broken(ops, mods, ctx):
        return ops[7]                       # IndexError: the kind of slip the old catch-all swallowed
    monkeypatch.setitem(semantics.HANDLERS, "popc", broken)
    with pytest.raises(IndexError):
        _notes(["S2R R0, SR_TID.X", "POPC R2, R0", "STS [R2], RZ"])


def test_a_form_a_handler_does_not_model_is_a_note():
    """LEA with a register shift amount is a genuine unmodelled form: the handler declines, a note names it."""
    notes = _notes(["S2R R0, SR_TID.X", "LEA R2, R0, RZ, R0", "STS [R2], RZ"])
    assert any("LEA" in note and "not modelled" in note for note in notes)


def test_shr_shifts_right():
    """SHR was evaluated as SHL (its family was looked up among the modifiers)."""
    module = parse_text(_listing(["S2R R0, SR_TID.X", "MOV R3, 0x400", "SHR.U32 R2, R3, 0x2", "STS [R2], RZ",
                                  "MOV R4, 0x80000000", "SHR R5, R4, 0x1c", "IADD3 R5, R5, 0x20, RZ",
                                  "STS [R5], RZ"], "sm_75"), "t.sass")
    result = emulate_sass(module, "k", Launch(block=(32, 1, 1), grid=(1, 1, 1)))
    assert not result.unresolved
    addresses = result.accesses.address
    assert (addresses[0] == 0x100).all()
    assert (addresses[1] == (0xFFFF_FFF8 + 0x20) % (1 << 32)).all()  # arithmetic: sign bits shifted in


def test_prmt_modes_are_the_ptx_levels():
    """PRMT.F4E (and the other modes) used to be 'not modelled'; they now use the PTX level's prmt."""
    module = parse_text(_listing(["S2R R0, SR_TID.X", "MOV R3, 0x44332211", "MOV R4, 0x88776655",
                                  "MOV R6, 0x1", "PRMT.F4E R2, R3, R6, R4", "LOP3.LUT R2, R2, 0xfff, RZ, 0xc0, !PT",
                                  "STS [R2], RZ"], "sm_75"), "t.sass")
    result = emulate_sass(module, "k", Launch(block=(32, 1, 1), grid=(1, 1, 1)))
    # f4e with selector 1: bytes 1..4 of {b, a} = 0x55443322
    assert (result.accesses.address[0] == 0x322).all()
    assert not any("not modelled" in note for note in result.notes)


def test_flo_popc_brev_iabs_agree_with_the_ptx_level():
    from traceconf.emulate import intops
    values = np.array([0, 1, 0x80000000, 0xFFFFFFFF, 0x12345678, 7], dtype=np.uint64)
    assert (semantics._flo(values, ["U32"]) == intops.find_msb(values, 32, False, False)).all()
    assert (semantics._flo(values, ["SH"]) == intops.find_msb(values, 32, True, True)).all()
    assert (semantics._popc(values, []) == [0, 1, 1, 32, 13, 3]).all()
    assert (semantics._brev(values, []) == intops.bit_reverse(values, 32)).all()
    assert (semantics._iabs(values, []) == [0, 1, 0x80000000, 1, 0x12345678, 7]).all()


def test_bmsk_is_the_ptx_levels_bit_mask():
    """BMSK (CUB radix rank's digit mask) was not modelled."""
    from traceconf.emulate import intops
    position = np.array([0, 1, 4, 31, 32, 3, 0], dtype=np.uint64)
    width = np.array([4, 2, 28, 1, 4, 40, 0], dtype=np.uint64)
    assert list(intops.bit_mask(position, width, False)) == [0xF, 0x6, 0xFFFF_FFF0, 0x8000_0000, 0, 0xFFFF_FFF8, 0]
    # .wrap: position 32 is 0, width 40 is 8
    assert list(intops.bit_mask(position, width, True)) == [0xF, 0x6, 0xFFFF_FFF0, 0x8000_0000, 0xF, 0x7F8, 0]
    module = parse_text(_listing(["S2R R0, SR_TID.X", "MOV R3, 0x4", "BMSK R2, RZ, R3", "LOP3.LUT R2, R0, R2, RZ, 0xc0, !PT",
                                  "STS [R2.X4], RZ"], "sm_75"), "t.sass")
    result = emulate_sass(module, "k", Launch(block=(32, 1, 1), grid=(1, 1, 1)))
    assert (result.accesses.address[0] == (np.arange(32) & 0xF) * 4).all() and not result.notes


def _run(body: list[str]):
    module = parse_text(_listing(body, "sm_75"), "t.sass")
    return emulate_sass(module, "k", Launch(block=(32, 1, 1), grid=(1, 1, 1)))


PACKED = ["S2R R0, SR_TID.X", "ISETP.GE.U32.AND P2, PT, R0, 0x10, PT", "P2R R2, PR, R2, 0x4",   # R2: never written
          "ISETP.GE.U32.AND P2, PT, R0, 0x40, PT"]                                              # P2 overwritten


def test_a_predicate_packed_into_an_uninitialised_register_comes_back_known():
    """Inductor's cumsum: ptxas keeps a predicate in bit 2 of a register whose other bits were never written;
    per-register taint made the predicate read back unknown and the guarded store unresolved."""
    for unpack in (["R2P PR, R2, 0x4"], ["LOP3.LUT P2, RZ, R2, 0x4, RZ, 0xc0, !PT"]):
        result = _run(PACKED + unpack + ["@P2 STS [R0.X4], RZ"])
        assert not result.unresolved, (unpack, result.unresolved)
        executed = result.accesses.address[0]
        assert list(np.flatnonzero(executed >= 0)) == list(range(16, 32)), unpack


def test_the_unwritten_bits_of_that_register_stay_unknown():
    result = _run(PACKED + ["LOP3.LUT P2, RZ, R2, 0x8, RZ, 0xc0, !PT", "@P2 STS [R0.X4], RZ"])
    assert result.unresolved
    result = _run(PACKED + ["IADD3 R2, R2, 0x1, RZ", "R2P PR, R2, 0x4", "@P2 STS [R0.X4], RZ"])
    assert result.unresolved                   # rewritten since: the record no longer holds


def test_r2p_unpacks_the_byte_its_register_operand_names():
    """``R2P PR, R0.B1, 0x7``: P0-P2 from bits 8-10 (ptxas packs several predicates in one byte of a register;
    the ldgsts_ignore_src probe's guard comes from bit 9)."""
    result = _run(["S2R R0, SR_TID.X", "SHF.L.U32 R1, R0, 0x8, RZ", "R2P PR, R1.B1, 0x7", "@P1 STS [R0.X4], RZ"])
    assert not result.unresolved
    assert list(np.flatnonzero(result.accesses.address[0] >= 0)) == [t for t in range(32) if t & 2]


def test_a_handler_bug_is_an_internal_error_at_the_command_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from traceconf.cli import app
    listing = tmp_path / "t.sass"
    listing.write_text(_listing(["S2R R0, SR_TID.X", "POPC R2, R0", "STS [R2], RZ"]))
    monkeypatch.setitem(semantics.HANDLERS, "popc", lambda ops, mods, ctx: ops[7])
    result = CliRunner().invoke(app, ["analyze", str(listing), "--block", "32"])
    assert result.exit_code == 70
    assert "internal error (IndexError" in result.stderr and "not modelled" not in result.output
