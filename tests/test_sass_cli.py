"""The SASS level through the commands: listings and binaries as input, --level on PTX, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from test_cli_first_hour import PTX
from traceconf.cli import app
from traceconf import tools

REPO = Path(__file__).resolve().parents[1]
CUDA = REPO / "tests" / "fixtures" / "cuda"
SASS = REPO / "tests" / "data" / "sass"
HW_SASS = REPO / "tests" / "data" / "hw" / "sass"
TRANSPOSE = ["--block", "32,8", "--grid", "32,32"]          # transpose_tile<...>(out, in, width)
HAVE_TOOLS = tools.locate("ptxas") is not None and tools.locate("nvdisasm") is not None
needs_tools = pytest.mark.skipif(not HAVE_TOOLS, reason="needs ptxas and nvdisasm (CUDA toolkit or NVIDIA pip wheels)")
needs_cuobjdump = pytest.mark.skipif(tools.locate("cuobjdump") is None or tools.locate("nvdisasm") is None,
                                     reason="needs cuobjdump and nvdisasm (CUDA toolkit or NVIDIA pip wheels)")


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def totals(output: str) -> dict[str, tuple[int, int]]:
    return {r["kernel"]: (r["totals"]["ld"]["wavefronts"], r["totals"]["st"]["wavefronts"])
            for r in json.loads(output)["results"]}


#: transpose_tile<0> (unpadded): 32-way conflicts on the loads; <1> (padded): none.
EXPECTED = {"_Z14transpose_tileILi0EEvPfPKfi": (1_048_576, 32_768), "_Z14transpose_tileILi1EEvPfPKfi": (32_768, 32_768)}


@pytest.mark.parametrize("listing", [HW_SASS / "transpose.sass", SASS / "transpose.sm_90.nvdisasm.sass",
                                     SASS / "transpose.sm_90.json"], ids=lambda p: p.name)
def test_analyze_a_sass_listing(listing):
    result = invoke("analyze", listing, *TRANSPOSE, "--format", "json")
    assert result.exit_code == 0, result.output
    assert totals(result.stdout) == EXPECTED


@needs_cuobjdump
def test_analyze_a_cubin_with_its_elf_parameters():
    result = invoke("analyze", SASS / "transpose.sm_90.cubin", *TRANSPOSE, "--param", "2=1024", "--format", "json")
    assert result.exit_code == 0, result.output
    assert totals(result.stdout) == EXPECTED


@needs_tools
def test_ptx_at_sass_level_sees_the_fused_loads_and_says_why():
    args = ["analyze", CUDA / "matmul.sm_90.ptx", "-k", ".*Li32.*", "--block", "32,32", "--grid", "4,4",
            "--param", "3=128"]
    ptx = invoke(*args, "--level", "ptx", "--format", "json")
    sass = invoke(*args, "--level", "sass", "--format", "json")
    assert ptx.exit_code == 0 and sass.exit_code == 0, (ptx.output, sass.output)
    assert totals(ptx.stdout)["_Z12matmul_tiledILi32EEvPKfS1_Pfi"][0] > totals(sass.stdout)["_Z12matmul_tiledILi32EEvPKfS1_Pfi"][0]
    table = invoke(*args, "--top", "3")
    assert "SASS level: ptxas -arch=sm_90" in table.stdout
    assert "ptxas fused 4 ld.shared.f32 (PTX lines 253, 256, 259, 262, matmul.cu:17) into LDS.128" in table.stdout
    assert "pc 0x2e0 LDS.128" in table.stdout


@needs_tools
def test_ptxas_options_pass_through_and_bad_ones_are_one_line_errors():
    args = ["analyze", CUDA / "matmul.sm_90.ptx", "-k", ".*Li32.*", "--block", "32,32", "--grid", "4,4",
            "--param", "3=128", "--level", "sass"]
    unoptimised = invoke(*args, "--ptxas-option=-O0", "--format", "json")
    assert unoptimised.exit_code == 0, unoptimised.output
    widths = {i["width_bits"] for i in json.loads(unoptimised.stdout)["results"][0]["instructions"]}
    assert widths == {32}                      # -O0: no fused 128-bit loads
    bad = invoke(*args, "--ptxas-option=--no-such-option")
    assert bad.exit_code == 2
    assert "--ptxas-option: ptxas rejects --no-such-option" in bad.output and "Unknown option" in bad.output
    assert "Traceback" not in bad.output


def test_auto_falls_back_to_ptx_with_a_note_for_devices_ptxas_does_not_target():
    result = invoke("analyze", CUDA / "transpose.sm_90.ptx", *TRANSPOSE, "--param", "2=1024", "-d", "sm_2x")
    assert result.exit_code == 0, result.output
    assert "PTX level: sm_2x is not an NVIDIA architecture ptxas targets" in result.stdout
    assert "L" in result.stdout and "ld.shared.f32" in result.stdout


def test_missing_ptxas_with_level_sass_names_how_to_get_one(monkeypatch):
    monkeypatch.setattr(tools, "locate", lambda name: None)
    result = invoke("analyze", CUDA / "transpose.sm_90.ptx", *TRANSPOSE, "--level", "sass")
    assert result.exit_code == 2
    assert "ptxas not found" in result.output and "pip install nvidia-cuda-nvcc" in result.output
    auto = invoke("analyze", CUDA / "transpose.sm_90.ptx", *TRANSPOSE, "--param", "2=1024")
    assert auto.exit_code == 0 and "PTX level: no ptxas found" in auto.stdout


def test_parse_and_explain_accept_sass():
    parsed = invoke("parse", HW_SASS / "transpose.sass", "--format", "json")
    assert parsed.exit_code == 0, parsed.output
    kernels = json.loads(parsed.stdout)
    assert {k["kernel"] for k in kernels} == set(EXPECTED)
    assert all(i["opcode"] in ("LDS", "STS") for k in kernels for i in k["shared_instructions"])
    explained = invoke("explain", SASS / "transpose.sm_90.nvdisasm.sass", "-k", "_Z14transpose_tileILi0EEvPfPKfi",
                       "-i", "transpose.cu:20", *TRANSPOSE)
    assert explained.exit_code == 0, explained.output
    assert "32 wavefronts, ideal 1, excess 31, worst 32-way" in explained.stdout


def test_a_broken_listing_is_one_located_line(tmp_path):
    broken = tmp_path / "broken.sass"
    broken.write_text("\tcode for sm_90\n\t\tFunction : k\n        /*0000*/                   S2R R0, SR_TID.X\n")
    result = invoke("analyze", broken, "--block", "32")
    assert result.exit_code == 2
    assert f"{broken}:3:36: missing ';' after the operands" in result.output


@needs_tools
def test_ptx_newer_than_the_device_falls_back_or_fails_with_the_reason():
    args = ["analyze", CUDA / "transpose.sm_90.ptx", *TRANSPOSE, "--param", "2=1024", "-d", "sm_80"]
    auto = invoke(*args)
    assert auto.exit_code == 0 and "PTX level: the PTX targets sm_90, newer than sm_80" in auto.stdout
    forced = invoke(*args, "--level", "sass")
    assert forced.exit_code == 2 and "--level sass: the PTX targets sm_90, newer than sm_80" in forced.output


@needs_tools
def test_older_architectures_assemble_and_agree():
    """sm_75 PTX assembled for sm_75 / sm_80 / sm_89 (parameter block at c[0x0][0x160], no reserved window)."""
    for device in ("sm_75", "sm_80", "sm_89"):
        result = invoke("analyze", CUDA / "transpose.sm_75.ptx", *TRANSPOSE, "--param", "2=1024", "-d", device,
                        "--level", "sass", "--format", "json")
        assert result.exit_code == 0, result.output
        assert totals(result.stdout) == EXPECTED


@needs_tools
def test_python_api_levels():
    import traceconf
    ptx = traceconf.analyze_ptx(CUDA / "types.sm_90.ptx", kernel=".*interleaved.*", block=64, grid=2, level="ptx")
    sass = traceconf.analyze_ptx(CUDA / "types.sm_90.ptx", kernel=".*interleaved.*", block=64, grid=2, level="sass")
    assert set(ptx["width_bits"]) == {32} and 64 in set(sass["width_bits"])
    assert sass["pc"].notna().all() and ptx["pc"].isna().all()
    listing = traceconf.analyze_sass(HW_SASS / "transpose.sass", block=(32, 8), grid=(32, 32))
    assert listing.groupby("kernel")["wavefronts"].sum().to_dict() == {k: sum(v) for k, v in EXPECTED.items()}


@needs_tools
def test_compare_ncu_lines_up_every_sass_instruction_with_the_source_page():
    report = REPO / "tests" / "data" / "hw" / "source_sm90" / "matmul_tiled_16.csv"
    result = invoke("compare-ncu", report, CUDA / "matmul.sm_90.ptx", "-k", ".*Li16.*", "--block", "16,16",
                    "--grid", "4,4", "--param", "3=64", "--format", "json")
    assert result.exit_code == 0, result.output
    (comparison,) = json.loads(result.stdout)["comparisons"]
    rows = comparison["by_pc"]
    assert len(rows) > 40 and any("LDS.128" in row["sass"] for row in rows)
    assert all(row["measured"] == row["predicted"] for row in rows)
    ptx = invoke("compare-ncu", report, CUDA / "matmul.sm_90.ptx", "-k", ".*Li16.*", "--block", "16,16",
                 "--grid", "4,4", "--param", "3=64", "--format", "json", "--level", "ptx")
    assert json.loads(ptx.stdout)["comparisons"][0]["by_pc"] == []     # PTX rows have no pc


@needs_tools
@pytest.mark.parametrize("launch, ptx, kernel, options", [
    *[(f"ldgsts_cg16_{launch}", "ldgsts", f"_Z6ldgstsILi16ELb1ELi{stride}EEvPKhPji",
       ["--block", "64", "--param", "1=0x7f1000000000", "--param", f"2={src_size}"])
      for launch, stride, src_size in (("s16", 16, 16), ("s32", 32, 16), ("s128", 128, 16), ("s16_src0", 16, 0),
                                       ("s128_src0", 128, 0), ("s16_zfill_half", 16, 8))],
    ("atom32_cas_used", "atomics2", "_Z7atomicsIL2Op3EjLb1EEvPT0_", ["--block", "32"]),
])
def test_compare_ncu_per_pc_on_a_bypass_copy_and_a_cas(launch, ptx, kernel, options):
    """LDGSTS.BYPASS.128.ZFILL (from its sources: the sources rule plus the fill pass, a 16-byte store's passes
    here; its P0 operand read as true, the src-size 0 launches included) and ATOMS.CAS (served twice): every pc
    as measured."""
    report = REPO / "tests" / "data" / "hw" / "source_sm90" / f"{launch}.csv"
    result = invoke("compare-ncu", report, CUDA / f"{ptx}.sm_90.ptx", "-k", kernel, *options, "--param",
                    "0=0x7f0000000000", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["comparisons"][0]["by_pc"]
    assert any(row["sass"].startswith(("LDGSTS.E.BYPASS", "ATOMS.CAS")) for row in rows)
    assert all(row["measured"] == row["predicted"] for row in rows)


@needs_cuobjdump
@pytest.mark.parametrize("binary", ["transpose.sm_90.fatbin", "libtranspose.sm_90.so"])
def test_analyze_a_fatbin_and_a_shared_library(binary):
    """Built from tests/fixtures/cuda/transpose.cu (nvcc -fatbin / nvcc -shared): cuobjdump finds the cubins."""
    result = invoke("analyze", SASS / binary, *TRANSPOSE, "--param", "2=1024", "--format", "json")
    assert result.exit_code == 0, result.output
    assert totals(result.stdout) == EXPECTED


@needs_tools
def test_an_error_in_the_assembled_sass_names_the_ptx_line(tmp_path):
    """ptxas's listing is nobody's file: an error at one of its instructions points at the PTX line it came from."""
    ptx = tmp_path / "strided.ptx"
    ptx.write_text(STRIDED)
    result = invoke("analyze", ptx, "--block", "64", "--level", "sass")
    assert result.exit_code == 2, result.output
    store = STRIDED.splitlines().index("    st.shared.f32 [%r6], %f1;") + 1
    assert result.stderr.startswith(f"{ptx}:{store}: kernel strided (_Z7stridedPfi): the shared-memory address at SASS "), result.stderr
    assert "--param stride=VALUE" in result.stderr


#: the first-hour test file's old-nvcc kernel, without its .maxntid (any block will do)
STRIDED = PTX.split(".visible .entry plain")[0].replace(".maxntid 64, 1, 1\n", "")


def test_parse_a_listing_piped_is_one_row_per_line_and_writes_atomically(tmp_path):
    """Piped (narrow terminal or none), the table keeps each instruction on one line with the readable kernel
    name; JSON is one kernel per line; -o writes the SASS table (never over the input)."""
    import pyarrow.parquet as pq

    from traceconf.programs.sass import load_sass_input
    listing = SASS / "transpose.sm_90.nvdisasm.sass"
    table = CliRunner().invoke(app, ["parse", str(listing)], env={"COLUMNS": "60"})
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].endswith("SASS sm_90, 2 kernel(s), 16 shared-memory instruction(s)") and len(lines) == 2 + 16
    assert all(line.startswith(("transpose_tile<0>", "transpose_tile<1>")) for line in lines[2:])
    assert "transpose_tile<1>   35  0x0230  transpose.cu:15  STS [R16+0x420], R11  4" in lines
    document = invoke("parse", listing, "--format", "json")
    assert document.exit_code == 0 and len(document.stdout.splitlines()) == 2 + 2
    assert {k["kernel"] for k in json.loads(document.stdout)} == set(EXPECTED)
    written = invoke("parse", listing, "-o", tmp_path / "s.parquet")
    assert written.exit_code == 0 and [p.name for p in tmp_path.iterdir()] == ["s.parquet"]
    assert pq.read_table(tmp_path / "s.parquet").equals(load_sass_input(listing).instructions)
    assert invoke("parse", listing, "-o", tmp_path / "s.csv").exit_code == 0
    assert '"LDC","","R1; c[0x0][0x28]"' in (tmp_path / "s.csv").read_text()
    copy = tmp_path / "copy.sass"
    copy.write_bytes(listing.read_bytes())
    refused = subprocess.run([sys.executable, "-m", "traceconf", "parse", str(copy), "-o", str(copy)],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "the output is the input file" in refused.stderr
    assert copy.read_bytes() == listing.read_bytes()


HIST = ["-k", "hist256", "--block", "256", "--grid", "2", "--param", "2=8192",
        "--data", f"0={CUDA / 'datadep_hist_uniform.npy'}", "--format", "json"]


@needs_tools
def test_data_is_analysed_at_the_sass_level_by_default():
    """--data no longer sends the analysis to the PTX level: auto assembles the PTX as without data, and the
    data's 809 ATOMS wavefronts (the H100's) come out at both levels."""
    auto = invoke("analyze", CUDA / "datadep.sm_90.ptx", *HIST)
    ptx = invoke("analyze", CUDA / "datadep.sm_90.ptx", *HIST, "--level", "ptx")
    assert auto.exit_code == 0 and ptx.exit_code == 0, (auto.output, ptx.output)
    (sass_result,), (ptx_result,) = json.loads(auto.stdout)["results"], json.loads(ptx.stdout)["results"]
    assert sass_result["launch"]["level"] == "sass" and "level" not in ptx_result["launch"]
    assert sass_result["totals"]["atom"]["wavefronts"] == ptx_result["totals"]["atom"]["wavefronts"] == 809
    assert not sass_result["unresolved"]


def test_data_on_a_sass_listing_names_parameters_by_offset_and_checks_them():
    """A cuobjdump listing of the measured binary: --data by index (param@0x0), exact; a key no kernel has is
    the PTX level's one-line error."""
    result = invoke("analyze", HW_SASS / "datadep.sass", *HIST)
    assert result.exit_code == 0, result.output
    (found,) = json.loads(result.stdout)["results"]
    assert found["totals"]["atom"]["wavefronts"] == 809 and "param@0x0" in found["launch"]["data"]
    bad = invoke("analyze", HW_SASS / "datadep.sass", *HIST[:-2], "--data", "nosuch=random:u8:16")
    assert bad.exit_code == 2 and "--data nosuch: no selected kernel has such a parameter" in bad.output


needs_nvcc = pytest.mark.skipif(tools.locate("nvcc") is None or tools.locate("nvdisasm") is None
                                or tools.locate("cuobjdump") is None, reason="needs nvcc, cuobjdump and nvdisasm")


def _executable(tmp_path: Path, *arch_options: str) -> Path:
    """tests/fixtures/emulate/transpose.cu built as a host executable with line info (issue 24, item 4)."""
    source = tmp_path / "transpose.cu"
    source.write_text((REPO / "tests" / "fixtures" / "emulate" / "transpose.cu").read_text()
                      + "\nint main() { return 0; }\n")
    binary = tmp_path / "transpose.out"
    subprocess.run([tools.locate("nvcc"), *arch_options, "-lineinfo", "-o", str(binary), str(source)], check=True,
                   capture_output=True)
    return binary


@pytest.mark.slow
@needs_nvcc
def test_an_executable_keeps_the_cuda_source_lines_of_its_cubin(tmp_path):
    binary = _executable(tmp_path, "-arch=sm_90")
    result = invoke("analyze", binary, "-k", "transpose_unpadded", "--block", "32,8", "--grid", "32,32",
                    "--format", "json")
    assert result.exit_code == 0, result.output
    [kernel] = json.loads(result.stdout)["results"]
    lines = {row["source"] for row in kernel["instructions"]}
    assert lines == {f"{tmp_path / 'transpose.cu'}:12", f"{tmp_path / 'transpose.cu'}:17"}
    assert kernel["totals"]["ld"]["wavefronts"] == 4 * 262_144


@pytest.mark.slow
@needs_nvcc
def test_a_binary_for_several_architectures_is_analysed_in_the_devices_cubin(tmp_path):
    binary = _executable(tmp_path, "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90")
    result = invoke("analyze", binary, "-k", "transpose_unpadded", "--block", "32,8", "--grid", "32,32",
                    "-d", "sm_90", "--format", "json")
    assert result.exit_code == 0, result.output
    [kernel] = json.loads(result.stdout)["results"]
    assert [row["ptx"] for row in kernel["instructions"] if row["kind"] == "ld"] == [
        "LDS R11, [R17]", "LDS R13, [R17+0x20]", "LDS R19, [R17+0x40]", "LDS R21, [R17+0x60]"]
    assert kernel["totals"]["ld"]["wavefronts"] == 4 * 262_144
    assert any("sm_90 cubin (their own architecture; the binary holds sm_80, sm_90)" in n for n in kernel["notes"])
    ampere = invoke("analyze", binary, "-k", "transpose_unpadded", "--block", "32,8", "--grid", "32,32",
                    "-d", "sm_86", "--format", "json")
    [kernel] = json.loads(ampere.stdout)["results"]
    assert {row["ptx"] for row in kernel["instructions"] if row["kind"] == "ld"} >= {"LDS R11, [R16.X4]"}
    assert any("sm_80 cubin (the newest of their major version" in n for n in kernel["notes"])


@needs_cuobjdump
def test_json_carries_the_kernel_relative_pc_the_readable_name_and_the_notes():
    """A script can line the JSON up with Nsight's Source page per pc and see why counts are partial
    (issue 24, items 7 and 13)."""
    result = invoke("analyze", SASS / "transpose.sm_90.cubin", *TRANSPOSE, "--param", "2=1024", "--format", "json")
    assert result.exit_code == 0, result.output
    padded = next(r for r in json.loads(result.stdout)["results"] if r["kernel"] == "_Z14transpose_tileILi1EEvPfPKfi")
    assert padded["kernel_name"] == "transpose_tile<1>" and isinstance(padded["notes"], list)
    first = padded["instructions"][0]
    assert (first["pc"], first["ptx"]) == (0x220, "STS [R16], R7")
    ptx = invoke("analyze", CUDA / "transpose.sm_90.ptx", *TRANSPOSE, "--param", "2=1024", "--format", "json")
    notes = json.loads(ptx.stdout)["results"][0]["notes"]
    assert any("SASS level" in note for note in notes), notes


@needs_tools
def test_mixed_devices_each_count_their_own_level():
    """``-d sm_90 -d sm_75 -d sm_1x -d cdna3`` (issue 24, item 9): each NVIDIA device counts the SASS of its
    own architecture, the others the PTX, and the notes name every device they concern."""
    result = invoke("analyze", CUDA / "transpose.sm_75.ptx", *TRANSPOSE, "--param", "2=1024", "-d", "sm_90",
                    "-d", "sm_75", "-d", "sm_1x", "-d", "cdna3", "--format", "json")
    assert result.exit_code == 0, result.output
    unpadded = [r for r in json.loads(result.stdout)["results"] if r["kernel"] == "_Z14transpose_tileILi0EEvPfPKfi"]
    levels = {(r["device"], r["launch"].get("level", "ptx")): r for r in unpadded}
    assert set(levels) == {("sm_90", "sass"), ("sm_75", "sass"), ("cdna3", "ptx"), ("sm_1x", "ptx")}
    ptx_notes = " ".join(levels["cdna3", "ptx"]["notes"])
    assert "sm_1x, cdna3 are not NVIDIA architectures ptxas targets" in ptx_notes
    assert any("ptxas -arch=sm_75" in n for n in levels["sm_75", "sass"]["notes"])
    assert levels["sm_90", "sass"]["totals"]["ld"]["wavefronts"] == EXPECTED["_Z14transpose_tileILi0EEvPfPKfi"][0]


@needs_tools
@pytest.mark.parametrize("level", ["ptx", "sass"])
def test_a_shared_atomic_is_placed_at_the_users_atomicadd_line(level):
    """atomicAdd's body is inlined from the toolkit's device_atomic_functions.hpp; the report places it at the
    user's call, through ``.loc … inlined_at`` (issue 24, item 11), at both levels."""
    result = invoke("analyze", CUDA / "atomics.sm_90.ptx", "-k", "histogram_shared", "--block", "256", "--grid", "2",
                    "-p", "2=4096", "--level", level, "--format", "json")
    assert result.exit_code == 0, result.output
    [kernel] = json.loads(result.stdout)["results"]
    assert {row["source"] for row in kernel["instructions"] if row["kind"] == "atom"} == {"atomics.cu:10"}
