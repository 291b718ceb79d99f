"""Rule files: builtins, aliases, user files, and clear errors for bad files."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from traceconf.cli import app
from traceconf.rules import EVIDENCE, RuleFileError, RuleSet, builtin_names, list_rule_sets, load_rule_set

REQUIRED = ["sm_1x", "sm_2x", "sm_3x", "sm_3x_8byte", "sm_50", "sm_52", "sm_60", "sm_61", "sm_70", "sm_75",
            "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "terascale", "gcn", "cdna1", "cdna2",
            "cdna3", "cdna4", "rdna3", "rdna4"]


def test_every_required_rule_set_is_shipped():
    assert sorted(builtin_names()) == sorted(REQUIRED)
    assert [r.name for r in list_rule_sets()][:4] == ["sm_1x", "sm_2x", "sm_3x", "sm_3x_8byte"]


@pytest.mark.parametrize("name", REQUIRED)
def test_builtin_rule_sets_are_complete(name):
    rules = load_rule_set(name)
    assert isinstance(rules, RuleSet) and rules.name == name and rules.source == "builtin"
    assert rules.evidence in EVIDENCE and rules.title and rules.vendor in ("NVIDIA", "AMD")
    assert "§" in rules.notes                       # every rule set cites bank_rules.md
    for kind in ("ld", "st"):
        for nbytes in (1, 2, 4, 8, 16):             # every width has a lane-group rule
            rules.lane_group_rule(kind, min(nbytes, rules.split_bytes))


def test_geometry_and_evidence_of_key_devices():
    facts = {n: (r.banks, r.bank_bytes, r.row_bytes, r.warp_size, r.evidence)
             for n, r in ((r.name, r) for r in list_rule_sets())}
    assert facts["sm_1x"] == (16, 4, 64, 32, "documented")
    assert facts["sm_3x"] == (32, 4, 256, 32, "documented")
    assert facts["sm_3x_8byte"] == (32, 8, 256, 32, "documented")
    assert facts["sm_90"] == (32, 4, 128, 32, "measured")
    assert facts["sm_100"][-1] == facts["sm_120"][-1] == "unverified"
    assert facts["cdna4"] == (64, 4, 256, 64, "measured")
    assert facts["rdna3"][3] == 32 and facts["gcn"][3] == 64


def test_aliases_inherit_and_report_shared_rules():
    hopper, blackwell = load_rule_set("sm_90"), load_rule_set("sm_100")
    assert blackwell.alias_of == "sm_90" and blackwell.same_rules_as == "sm_90"
    assert (blackwell.lane_groups, blackwell.pairing, blackwell.matrix) == (hopper.lane_groups, hopper.pairing,
                                                                           hopper.matrix)
    assert load_rule_set("sm_3x_8byte").same_rules_as is None          # overrides bank_bytes
    assert load_rule_set("sm_86").same_rules_as == "sm_75"
    assert load_rule_set("sm_50").pairing is None and load_rule_set("sm_70").pairing is not None
    assert load_rule_set("sm_70").matrix is None and load_rule_set("sm_75").matrix.kinds == {"ldmatrix"}


def test_swizzled_amd_groups():
    cdna3 = load_rule_set("cdna3")
    assert cdna3.lane_group_rule("ld", 16).groups[0] == (0, 1, 2, 3, 20, 21, 22, 23)
    assert cdna3.lane_group_rule("st", 16).groups[0] == tuple(range(8))
    assert load_rule_set("rdna4").lane_group_rule("ld", 16).groups[0] == tuple(range(8))


GOOD = """
name = "my_gpu"
title = "My GPU"
vendor = "Acme"
evidence = "inferred"
warp_size = 32
banks = 32
bank_bytes = 4
row_bytes = 128

[[lane_groups]]
bytes = [1, 2, 4, 8, 16]
lanes = 32
"""


def test_user_file_by_path(tmp_path):
    path = tmp_path / "my_gpu.toml"
    path.write_text(GOOD)
    rules = load_rule_set(str(path))
    assert rules.name == "my_gpu" and rules.source == str(path.resolve())
    assert rules.broadcast == "multicast" and rules.split_bytes == 16 and rules.merge_stores
    assert rules.pairing is None and rules.matrix is None
    assert load_rule_set(path) == rules


@pytest.mark.parametrize("change, key, message", [
    (("banks = 32", "banks = 48"), "banks", "power of two"),
    (("warp_size = 32", "warp_size = 16"), "warp_size", "expected one of 32, 64"),
    (("evidence = \"inferred\"", "evidence = \"guessed\""), "evidence", "measured, documented"),
    (("row_bytes = 128", "row_bytes = 64"), "row_bytes", "multiple of banks x bank_bytes = 128"),
    (("lanes = 32", "lanes = 12"), "lane_groups[0].lanes", "does not divide the warp size"),
    (("bytes = [1, 2, 4, 8, 16]", "bytes = [3]"), "lane_groups[0].bytes", "list of widths"),
    (("lanes = 32", "groups = [[0, 1], [1, 2]]"), "lane_groups[0].groups", "exactly once"),
    (("vendor = \"Acme\"", "vendor = \"Acme\"\nbankz = 3"), "bankz", "unknown key"),
    (("bank_bytes = 4", "bank_bytes = 4\nbroadcast = \"single_word\""), "split_bytes", "must not exceed"),
])
def test_bad_user_files_name_file_key_and_problem(tmp_path, change, key, message):
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace(*change))
    with pytest.raises(RuleFileError) as info:
        load_rule_set(str(path))
    error = info.value
    assert error.file == str(path.resolve())
    assert f"key {key!r}" in error.message and message in error.message
    leaf = key.split(".")[-1].split("[")[0]
    lines = path.read_text().splitlines()
    if not any(line.lstrip().startswith((leaf, f"[[{leaf}]]")) for line in lines):
        assert error.line is None   # a default the file does not write (split_bytes): no line to show
    else:                           # the line of the key, shown with the source line
        assert leaf in lines[error.line - 1] and error.source_line == lines[error.line - 1]


def test_toml_syntax_error_has_line_and_column(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text(GOOD.replace("banks = 32", "banks = = 32"))
    with pytest.raises(RuleFileError) as info:
        load_rule_set(str(path))
    assert "not valid TOML" in info.value.message
    assert info.value.line == 7 and info.value.column is not None
    assert str(info.value).startswith(f"{path.resolve()}:7:")


def test_missing_key_unknown_alias_and_unknown_device(tmp_path):
    path = tmp_path / "partial.toml"
    path.write_text(GOOD.replace("row_bytes = 128\n", ""))
    with pytest.raises(RuleFileError, match="missing required key 'row_bytes'"):
        load_rule_set(str(path))
    path.write_text('name = "scratch"\nbanks = 32\n')        # written from scratch: every missing key at once
    with pytest.raises(RuleFileError, match="missing required keys 'title', 'vendor', 'evidence', 'warp_size', "
                                            "'bank_bytes', 'row_bytes', 'lane_groups'$"):
        load_rule_set(str(path))
    path.write_text('alias_of = "sm_999"\nname = "x"\n')
    with pytest.raises(RuleFileError, match="unknown builtin rule set 'sm_999'"):
        load_rule_set(str(path))
    with pytest.raises(RuleFileError, match="unknown device 'sm_91'.*sm_90"):
        load_rule_set("sm_91")
    with pytest.raises(RuleFileError, match="cannot read rule file: No such file"):
        load_rule_set(str(tmp_path / "absent.toml"))


def test_user_alias_of_a_builtin(tmp_path):
    path = tmp_path / "wide.toml"
    path.write_text('alias_of = "sm_90"\nname = "wide"\ntitle = "sm_90 with 64 banks"\nevidence = "unverified"\n'
                    "banks = 64\nrow_bytes = 256\n")
    rules = load_rule_set(str(path))
    assert (rules.banks, rules.row_bytes, rules.vendor, rules.pairing) == (64, 256, "NVIDIA",
                                                                           load_rule_set("sm_90").pairing)


def test_alias_tables_merge_key_by_key(tmp_path):
    """An alias that sets one entry of a table keeps the base's other entries (and its other tables)."""
    path = tmp_path / "merging.toml"
    path.write_text('alias_of = "sm_90"\nname = "merging"\ntitle = "sm_90, stores never merge"\n'
                    'evidence = "unverified"\n[merge_same_word]\nst = false\n')
    rules = load_rule_set(str(path))
    assert not rules.merges("atom")           # sm_90's [merge_same_word] atom = false survives
    assert not rules.merges("st") and rules.merges("ld")
    assert rules.pairing == load_rule_set("sm_90").pairing


def test_devices_command_lists_every_rule_set_one_line_each():
    result = CliRunner().invoke(app, ["devices"])
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert len(lines) == len(REQUIRED)
    hopper = next(line for line in lines if line.startswith("sm_90 "))
    assert "NVIDIA" in hopper and "32 x 4 B" in hopper and "warp 32" in hopper and "measured" in hopper
    assert any(line.startswith("cdna4") and "64 x 4 B" in line and "warp 64" in line for line in lines)


def test_devices_command_shows_one_rule_set_in_full():
    result = CliRunner().invoke(app, ["devices", "sm_90"])
    assert result.exit_code == 0
    assert "pairing" in result.output and "one group per matrix" in result.output and "§4.3" in result.output
    assert "every lane of atom on one word costs its own pass" in result.output
    ops = [line.split()[1] for line in result.output.splitlines() if line.startswith("  op ")]
    assert ops == ["bypass", "bypass_zfill", "cas", "cas_spin", "popc_inc"]   # every [atomic_ops] / [copy_ops] rule
    assert "active lanes' bytes fill" in result.output and "an active group takes one pass" in result.output
    assert "served 2 times" in result.output and "plus the access as the kind without this operation" in result.output


@pytest.mark.parametrize("device, rule_set", [
    ("h100", "sm_90"), ("H200", "sm_90"), ("sm90", "sm_90"), ("SM_90", "sm_90"), ("compute_90a", "sm_90"),
    ("a100", "sm_80"), ("RTX 4090", "sm_89"), ("rtx-4090", "sm_89"), ("mi300x", "cdna3"), ("MI355X", "cdna4"),
    ("sm_87", "sm_86"), ("sm_103a", "sm_100"), ("sm_13", "sm_1x"), ("sm_21", "sm_2x"), ("sm_35", "sm_3x"), ("v100", "sm_70"),
])
def test_devices_resolve_by_architecture_and_product(device, rule_set):
    assert load_rule_set(device).name == rule_set


def test_unknown_device_says_did_you_mean():
    with pytest.raises(RuleFileError, match="unknown device 'h1000'; did you mean 'h100'"):
        load_rule_set("h1000")


def test_product_names_are_unique_and_not_inherited_by_aliases():
    owners = {}
    for rules in list_rule_sets():
        for product in rules.products:
            assert product not in owners, f"{product} in {owners.get(product)} and {rules.name}"
            owners[product] = rules.name
    assert load_rule_set("sm_52").products != load_rule_set("sm_50").products
    assert "h100" in load_rule_set("sm_90").products and "h100" not in load_rule_set("sm_100").products


# --------------------------------------------------------------------------- the ptxas architecture is data


def test_nvidia_rule_sets_name_their_ptxas_architecture():
    arches = {rules.name: rules.arch for rules in list_rule_sets()}
    assert arches["sm_90"] == "sm_90" and arches["sm_86"] == "sm_86"          # an alias states its own
    assert arches["sm_2x"] is None and arches["sm_3x_8byte"] is None           # families: ptxas targets none
    assert all(arch is None for name, arch in arches.items() if load_rule_set(name).vendor != "NVIDIA")


def test_a_user_alias_inherits_the_architecture_and_keeps_the_sass_level(tmp_path, monkeypatch):
    from traceconf import tools
    from traceconf.programs import choose_level
    from traceconf.sass import toolchain

    path = tmp_path / "mine.toml"
    path.write_text('name = "my_h100"\nalias_of = "sm_90"\ntitle = "my H100"\nevidence = "unverified"\n')
    rules = load_rule_set(path)
    assert rules.name == "my_h100" and rules.arch == "sm_90"
    monkeypatch.setattr(tools, "locate", lambda name: f"/bin/{name}")      # a ptxas and nvdisasm are found
    monkeypatch.setattr(toolchain, "ptxas_targets", lambda: {"sm_90"})
    assert choose_level("auto", [rules]) == ("sass", "sm_90", None)
    path.write_text('name = "my_amd"\nalias_of = "cdna3"\ntitle = "mine"\nevidence = "unverified"\n')
    level, arch, note = choose_level("auto", [load_rule_set(path)])
    assert (level, arch) == ("ptx", None) and "my_amd is not an NVIDIA architecture ptxas targets" in note


def test_a_bad_architecture_names_the_key(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('alias_of = "sm_90"\nname = "bad"\narch = "hopper"\n')
    with pytest.raises(RuleFileError, match=r"key 'arch': expected a ptxas architecture such as 'sm_90'") as error:
        load_rule_set(path)
    assert error.value.line == 3


def test_a_user_rule_file_edited_between_two_calls_is_read_again(tmp_path):
    path = tmp_path / "edited.toml"
    path.write_text('alias_of = "sm_90"\nname = "edited"\ntitle = "first"\nevidence = "unverified"\n')
    assert load_rule_set(path).title == "first"
    path.write_text('alias_of = "sm_90"\nname = "edited"\ntitle = "other"\nevidence = "unverified"\n')  # same size
    assert load_rule_set(path).title == "other"
    assert load_rule_set(path) is load_rule_set(path)          # an unchanged file is built once
