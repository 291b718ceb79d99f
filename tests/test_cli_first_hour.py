"""A CUDA developer's first hour: launches, kernel and parameter names, devices, as the CLI takes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceconf.cli import app

TRACES = Path(__file__).resolve().parents[1] / "traces"

# Two kernels: an old-nvcc one (``__cudaparm_`` parameter names, .maxntid) whose shared store is strided by its
# parameter ``stride``, and a new-style one with one parameter and no launch bounds.
PTX = """.version 7.0
.target sm_80
.address_size 64

.visible .entry _Z7stridedPfi(
    .param .u64 __cudaparm__Z7stridedPfi_out,
    .param .u32 __cudaparm__Z7stridedPfi_stride
)
.maxntid 64, 1, 1
{
    .reg .b32 %r<7>;
    .reg .f32 %f<2>;
    .shared .align 4 .b8 buf[8192];
    ld.param.u32 %r1, [__cudaparm__Z7stridedPfi_stride];
    mov.u32 %r2, %tid.x;
    mul.lo.u32 %r3, %r2, %r1;
    shl.b32 %r4, %r3, 2;
    mov.f32 %f1, 0f3F800000;
    mov.u32 %r5, buf;
    add.u32 %r6, %r5, %r4;
    st.shared.f32 [%r6], %f1;
    ret;
}

.visible .entry plain(
    .param .u64 plain_param_0
)
{
    .reg .b32 %r<5>;
    .reg .f32 %f<2>;
    .shared .align 4 .b8 tile[128];
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.f32 %f1, 0f3F800000;
    mov.u32 %r3, tile;
    add.u32 %r4, %r3, %r2;
    st.shared.f32 [%r4], %f1;
    ret;
}
"""


@pytest.fixture()
def ptx(tmp_path):
    path = tmp_path / "two.ptx"
    path.write_text(PTX)
    return path


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def results(output: str) -> dict:
    return {r["kernel"]: r for r in json.loads(output)["results"]}


def test_block_from_maxntid_with_a_note_and_source_parameter_name(ptx):
    result = run("analyze", ptx, "-k", "strided", "--param", "stride=32", "-f", "json")
    assert result.exit_code == 0, result.output
    (found,) = results(result.stdout).values()
    assert found["launch"]["block"] == [64, 1, 1] and found["launch"]["block_from"] == ".maxntid"
    assert found["launch"]["params"] == {"__cudaparm__Z7stridedPfi_stride": 32}
    assert found["totals"]["st"]["wavefronts"] == 64                  # 2 warps, each 32-way
    table = run("analyze", ptx, "-k", "strided", "--param", "stride=32")
    assert "taken from the kernel's .maxntid" in table.stdout


def test_missing_block_says_which_options(ptx):
    result = run("analyze", ptx, "-k", "plain")
    assert result.exit_code == 2
    assert "states neither .reqntid nor .maxntid: pass the launch with --block" in result.stderr


def test_param_by_index_applies_only_to_kernels_that_have_it(ptx):
    result = run("analyze", ptx, "--block", "32", "--param", "1=1", "-f", "json")
    assert result.exit_code == 0, result.output
    found = results(result.stdout)
    assert found["_Z7stridedPfi"]["launch"]["params"] == {"__cudaparm__Z7stridedPfi_stride": 1}
    assert found["plain"]["launch"]["params"] == {}


def test_new_nvcc_parameters_are_spelled_by_index_in_the_launch_line_and_messages(tmp_path):
    # <kernel>_param_N (new nvcc, Triton) is spelled N, the key --param takes, not the mangled name
    path = tmp_path / "bound.ptx"
    path.write_text(""".version 8.0
.target sm_90
.address_size 64
.visible .entry _Z5boundPfi(
    .param .u64 _Z5boundPfi_param_0,
    .param .u32 _Z5boundPfi_param_1
)
{
    .reg .b32 %r<6>;
    .reg .pred %p<2>;
    .shared .align 4 .b8 buf[512];
    ld.param.u32 %r1, [_Z5boundPfi_param_1];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    shl.b32 %r3, %r2, 2;
    mov.u32 %r4, buf;
    add.u32 %r5, %r4, %r3;
    st.shared.u32 [%r5], %r2;
DONE:
    ret;
}
""")
    missing = run("analyze", path, "--block", "32", "--level", "ptx")
    assert missing.exit_code == 2 and "pass --param 1=VALUE" in missing.stderr, missing.stderr
    given = run("analyze", path, "--block", "32", "--level", "ptx", "--param", "1=16")
    assert given.exit_code == 0 and "params 1=16" in given.stdout and "_param_1=" not in given.stdout


def test_param_no_kernel_has_is_an_error(ptx):
    result = run("analyze", ptx, "--block", "32", "--param", "7=1")
    assert result.exit_code == 2
    assert "--param 7: no selected kernel has such a parameter" in result.stderr


def test_block_over_maxntid_is_refused(ptx):
    result = run("analyze", ptx, "-k", "strided", "--block", "128", "--param", "stride=1")
    assert result.exit_code == 2
    assert "allows at most .maxntid (64, 1, 1) = 64 threads per block" in result.stderr
    refused = run("analyze", ptx, "-k", "strided", "--block", "16,8", "--param", "stride=1")
    assert refused.exit_code == 2 and "the launch block (16, 8, 1) has 128" in refused.stderr


def test_maxntid_limits_the_thread_count_not_each_dimension(ptx):
    # `.maxntid 64, 1, 1` (__launch_bounds__(64)): the driver accepts an 8x8 block, as it checks the product
    result = run("analyze", ptx, "-k", "strided", "--block", "8,8", "--param", "stride=1", "-f", "json")
    assert result.exit_code == 0, result.output
    assert results(result.stdout)["_Z7stridedPfi"]["launch"]["block"] == [8, 8, 1]


def test_reqntid_gives_the_block_and_refuses_another(tmp_path):
    path = tmp_path / "req.ptx"
    path.write_text(PTX.replace(".visible .entry plain(\n    .param .u64 plain_param_0\n)\n",
                                ".visible .entry plain(\n    .param .u64 plain_param_0\n)\n.reqntid 128, 1, 1\n"))
    taken = run("analyze", path, "-k", "plain", "-f", "json")
    assert taken.exit_code == 0, taken.output
    assert results(taken.stdout)["plain"]["launch"]["block"] == [128, 1, 1]
    refused = run("analyze", path, "-k", "plain", "--block", "64")
    assert refused.exit_code == 2
    assert "kernel plain requires .reqntid (128, 1, 1) but the launch block is (64, 1, 1)" in refused.stderr


def test_demangled_and_partial_kernel_names(ptx):
    for pattern in ("strided", "strided(float*, int)", "_Z7stridedPfi", "stri"):
        result = run("analyze", ptx, "-k", pattern, "--param", "stride=1", "-f", "json")
        assert list(results(result.stdout)) == ["_Z7stridedPfi"], pattern
    result = run("analyze", ptx, "-k", "strided_kernel", "--param", "stride=1")
    assert result.exit_code == 2 and "did you mean 'strided'" in result.stderr


@pytest.mark.parametrize("device, rule_set", [("h100", "sm_90"), ("A100", "sm_80"), ("sm90", "sm_90"),
                                              ("mi300x", "cdna3")])
def test_device_aliases(ptx, device, rule_set):
    result = run("analyze", ptx, "-k", "plain", "--block", "32", "-d", device, "-f", "json")
    assert result.exit_code == 0, result.output
    assert results(result.stdout)["plain"]["device"] == rule_set


def test_unknown_device_did_you_mean(ptx):
    result = run("analyze", ptx, "-k", "plain", "--block", "32", "-d", "h1000")
    assert result.exit_code == 2 and "did you mean 'h100'" in result.stderr


def test_cuda_source_says_how_to_make_ptx(tmp_path):
    source = tmp_path / "kernel.cu"
    source.write_text("#include <cuda_runtime.h>\n__global__ void k(float *x) { x[threadIdx.x] = 0; }\n")
    result = run("analyze", source)
    assert result.exit_code == 2
    assert "this is CUDA source" in result.stderr and "nvcc -ptx -arch=sm_90 -lineinfo kernel.cu" in result.stderr


def test_trace_folder_is_analysed_like_its_kernelslist():
    folder = run("analyze", TRACES / "accelsim-kernelslist", "-f", "json")
    listing = run("analyze", TRACES / "accelsim-kernelslist" / "kernelslist.g", "-f", "json")
    assert folder.exit_code == listing.exit_code == 0
    strip = lambda doc: [{k: v for k, v in r.items() if k != "launch"} for r in json.loads(doc)["results"]]  # noqa: E731
    assert strip(folder.stdout) == strip(listing.stdout) and strip(folder.stdout)


def test_unwritable_output_format_is_refused_before_any_work(ptx, tmp_path):
    result = run("analyze", ptx, "-k", "plain", "--block", "32", "-o", tmp_path / "r.xlsx")
    assert result.exit_code == 2
    assert "cannot write .xlsx: use one of .parquet, .csv, .json" in result.stderr
    assert result.stdout == ""                       # nothing printed, nothing analysed


def test_trace_with_a_device_that_cannot_count_it_keeps_the_others():
    trace = TRACES / "accelsim-v4-mode0.traceg"
    result = run("analyze", trace, "-d", "sm_90", "-d", "cdna3", "-f", "json")
    assert result.exit_code == 0, result.output
    sm90, cdna3 = json.loads(result.stdout)["results"]
    assert sm90["totals"]["ld"]["wavefronts"] > 0
    assert all(not row["resolved"] for row in cdna3["instructions"])
    table = run("analyze", trace, "-d", "sm_90", "-d", "cdna3")
    assert "note: not counted on cdna3: accesses have 32 lanes per warp but rule set 'cdna3' expects 64" in table.stdout
    alone = run("analyze", trace, "-d", "cdna3")
    assert alone.exit_code == 2
    assert alone.stderr.count("_Z13bank_patternsPf") == 1          # the kernel named once


def test_extern_shared_without_dynamic_smem_is_one_note_with_the_size(tmp_path):
    path = tmp_path / "extern.ptx"
    path.write_text(""".version 7.0
.target sm_80
.address_size 64
.extern .shared .align 4 .b8 dyn[];
.visible .entry k()
{
    .reg .b32 %r<6>;
    .reg .f32 %f<2>;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, dyn;
    add.u32 %r4, %r3, %r2;
    mov.f32 %f1, 0f3F800000;
    st.shared.f32 [%r4], %f1;
    ld.shared.f32 %f1, [%r4+4];
    st.shared.f32 [%r4+8], %f1;
    ret;
}
""")
    result = run("analyze", path, "--block", "64")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stdout.splitlines() if "dynamic-smem" in line]
    assert len(notes) == 1 and "the extern shared array is used up to byte 264" in notes[0]
    assert "so it was taken as --dynamic-smem 264; pass the launch's real size to check it" in notes[0]
    ptx_level = run("analyze", path, "--block", "64", "--level", "ptx")
    assert "(PTX line 14, PTX line 15, PTX line 16)" in ptx_level.stdout


LAUNCHES = """# the two kernels of two.ptx, written once
[[launch]]
kernel = "strided"          # the demangled function name
block = 64
grid = [4, 2]
params = { stride = 32 }

[[launch]]
kernel = "plain"
block = [32]
"""


def test_launch_file_describes_every_kernel_once(ptx, tmp_path):
    launches = tmp_path / "launches.toml"
    launches.write_text(LAUNCHES)
    result = run("analyze", ptx, "--launches", launches, "-f", "json")
    assert result.exit_code == 0, result.output
    found = results(result.stdout)
    assert found["_Z7stridedPfi"]["launch"]["block"] == [64, 1, 1]
    assert found["_Z7stridedPfi"]["launch"]["grid"] == [4, 2, 1]
    assert found["_Z7stridedPfi"]["totals"]["st"]["wavefronts"] == 64 * 8        # 8 CTAs, 2 warps each 32-way
    assert found["plain"]["launch"]["block"] == [32, 1, 1]
    # the command line wins over the file: --grid for every kernel, --param added to the file's
    override = run("analyze", ptx, "--launches", launches, "--grid", "1", "--param", "stride=1", "-f", "json")
    found = results(override.stdout)
    assert found["_Z7stridedPfi"]["launch"]["grid"] == [1, 1, 1]
    assert found["_Z7stridedPfi"]["totals"]["st"]["wavefronts"] == 2
    explain = run("explain", ptx, "-k", "strided", "-i", "L21", "--launches", launches)
    assert explain.exit_code == 0, explain.output
    assert "32 wavefronts" in explain.stdout


@pytest.mark.parametrize("text, message", [
    ('[[launch]]\nkernel = "plain"\nblok = 32\n', "launches.toml:3:1: key 'blok': unknown key"),
    ('[[launch]]\nblock = 32\n', "every [[launch]] needs kernel"),
    ('[[launch]]\nkernel = "plain"\nblock = [0]\n', "launches.toml:3:1: key 'block': expected 1 to 3 positive"),
    ('[[launch]]\nkernel = "strided"\nparams = { width = 3 }\n', "kernel _Z7stridedPfi has no parameter width"),
    ('[[launch]\n', "launches.toml:1:"),
])
def test_bad_launch_files_are_located(ptx, tmp_path, text, message):
    launches = tmp_path / "launches.toml"
    launches.write_text(text)
    result = run("analyze", ptx, "--launches", launches, "--block", "32")
    assert result.exit_code == 2
    assert message in result.stderr


def test_tma_copies_and_wgmma_operands_are_named_not_dropped(tmp_path):
    path = tmp_path / "hopper.ptx"
    path.write_text(""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 src)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    .shared .align 128 .b8 tile[4096];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [src];
    mov.u32 %r1, tile;
    mov.u32 %r2, bar;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 4096, [%r2];
    ret;
}
""")
    result = run("analyze", path, "--block", "128", "-f", "json")
    assert result.exit_code == 0, result.output
    (found,) = json.loads(result.stdout)["results"]
    (copy,) = [row for row in found["instructions"] if row["kind"] == "tma"]
    assert not copy["resolved"] and copy["wavefronts"] == 0
    (entry,) = found["unresolved"]
    assert "bulk/tensor asynchronous copy (TMA)" in entry["reason"]
    matmul = Path(__file__).resolve().parent / "fixtures" / "triton" / "tt_matmul.ptx"
    result = run("analyze", matmul, "--grid", "4,4", "--block", "128", "-p", "3=256", "-p", "4=256", "-p", "5=256")
    assert result.exit_code == 0, result.output
    assert "wgmma reads its A/B operands from shared memory through matrix descriptors" in result.stdout


def test_ptx_8_5_abi_directives_parse_and_analyse(tmp_path):
    """A public parser's sample: `.callprototype ... .abi_preserve 4 .abi_preserve_control 2;` in a kernel body."""
    path = tmp_path / "abi.ptx"
    path.write_text(""".version 8.5
.target sm_90
.address_size 64
.visible .func (.param .b32 r) f(.param .b32 x) .abi_preserve 8 .abi_preserve_control 4
{
    ret;
}
.visible .entry k() .abi_preserve 2
{
    .reg .b32 %r<3>;
    .shared .align 4 .b8 buf[512];
    entry_proto: .callprototype _ (.param .u32 p) .abi_preserve 4 .abi_preserve_control 2;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 3;
    st.shared.u32 [%r2], %r1;
    ret;
}
""")
    parsed = run("parse", path)
    assert parsed.exit_code == 0, parsed.output
    assert "1 kernel(s), 1 shared-memory instruction(s)" in parsed.stdout
    result = run("analyze", path, "--block", "32", "--level", "ptx", "-f", "json")
    assert result.exit_code == 0, result.output
    assert results(result.stdout)["k"]["totals"]["st"]["wavefronts"] == 2       # 8-byte stride: 2-way


def test_help_of_the_package_shows_the_api():
    """``help(traceconf)`` lists the entry points although they are imported lazily (issue 24, item 10)."""
    import pydoc

    import traceconf

    text = pydoc.render_doc(traceconf, renderer=pydoc.plaintext)
    for name in ("analyze_ptx(", "analyze_sass(", "analyze_trace(", "InputError"):
        assert name in text
    assert {"analyze_ptx", "analyze_sass", "analyze_trace"} <= set(dir(traceconf))


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o default -F"), ("zsh", "#compdef traceconf"),
                                           ("fish", "complete --command traceconf")])
def test_shell_completion_is_offered(monkeypatch, shell, marker):
    """``traceconf --install-completion`` / ``--show-completion SHELL`` (issue 24, item 10).  Typer finds the
    user's shell from the parent processes (shellingham) and then ignores the SHELL argument, so the test
    names it explicitly: what it prints must not depend on which process started pytest."""
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    runner = CliRunner()
    assert "--install-completion" in runner.invoke(app, ["--help"]).output
    shown = runner.invoke(app, ["--show-completion", shell], prog_name="traceconf")
    assert shown.exit_code == 0 and marker in shown.output, shown.output


def test_a_launch_file_shared_by_several_inputs_names_kernels_of_each(tmp_path):
    """A project-wide launch file: each input runs the kernels it has, the entries of the others are a note
    (issue 24, item 3); a name no input has is still an error."""
    fixtures = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "emulate"
    launches = tmp_path / "launches.toml"
    launches.write_text('[[launch]]\nkernel = "transpose_unpadded"\nblock = [32, 8]\ngrid = [32, 32]\n'
                        '[[launch]]\nkernel = "reduce_sequential"\nblock = [256]\ndynamic_smem = 1024\n')
    result = CliRunner().invoke(app, ["analyze", str(fixtures / "transpose.ptx"), str(fixtures / "reduce.ptx"),
                                      "--launches", str(launches), "--level", "ptx", "--format", "json"])
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)["results"]
    assert [r["kernel"] for r in results] == ["transpose_unpadded", "reduce_sequential"]
    assert "the launch file names no kernel of this input for 'reduce_sequential'" in " ".join(results[0]["notes"])
    missing = CliRunner().invoke(app, ["analyze", str(fixtures / "transpose.ptx"), "-k", "transpose_unpaded"])
    assert missing.exit_code == 2 and "no kernel matches 'transpose_unpaded'" in missing.output


def test_parameters_by_their_cuda_source_names(tmp_path):
    """nvcc's PTX names parameters ``_Z…_param_N``; the CUDA source its line info names declares them
    (issue 24, item 1): ``-p width=1024`` works, and a wrong name lists names and indices."""
    cuda = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "cuda"
    args = ["analyze", str(cuda / "transpose.sm_90.ptx"), "--block", "32,8", "--grid", "32,32", "--format", "json"]
    by_name = CliRunner().invoke(app, args + ["-p", "width=1024"])
    by_index = CliRunner().invoke(app, args + ["-p", "2=1024"])
    assert by_name.exit_code == 0, by_name.output
    assert json.loads(by_name.stdout)["results"] == json.loads(by_index.stdout)["results"]
    wrong = CliRunner().invoke(app, args + ["-p", "widht=1024"])
    assert wrong.exit_code == 2
    assert "0 out, 1 in, 2 width" in wrong.output and "give the name or the index" in wrong.output


@pytest.mark.parametrize("declaration, names", [
    ("__global__ void k(float* out, const float* __restrict__ in, int width) {", ["out", "in", "width"]),
    ("template <int N, typename T>\n__global__ void\nk(T *dst, const T *src /* input */, int n = 4)", ["dst", "src", "n"]),
    ("extern \"C\" __global__ void k(float tile[32][33], unsigned int stride)", ["tile", "stride"]),
    ("__device__ int k(int a);\n__global__ void k(float* out, int)", None),          # an unnamed parameter
    ("__device__ void k(float* out, int n);", None),                                 # not a kernel
])
def test_declared_parameter_names(tmp_path, declaration, names):
    from traceconf.sources import declared_parameters

    source = tmp_path / "k.cu"
    source.write_text(declaration + "\n{\n}\n")
    assert declared_parameters(source, "k", declaration.count("\n") + 2, len(names or [0, 0])) == names
