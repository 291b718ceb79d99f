"""Issue 14: every bad or hostile input is one clean error; every output is written safely.

Each crash the fuzz campaign found is a case here (the PTX ones are edits of the transpose fixture run
through the real CLI: exit status 2, one located line, no traceback).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

TRANSPOSE = FIXTURES / "emulate" / "transpose.ptx"


def _run(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "traceconf", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    text = TRANSPOSE.read_text()
    assert old in text
    path = tmp_path / "k.ptx"
    path.write_text(text.replace(old, new, 1))
    return path


def _clean_error(result, message: str, status: int = 2) -> None:
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr
    assert message in result.stderr, result.stderr


# (old text of the fixture, new text, expected message)
NUMBER_EDGES = [
    (".address_size 64", ".address_size 4294967295", ".address_size 4294967295 is not valid: PTX defines 32 and 64"),
    (".address_size 64", ".address_size 9223372036854775808", "is not valid: PTX defines 32 and 64"),
    (".address_size 64", ".address_size 0x8000000000000000", "is not valid: PTX defines 32 and 64"),
    (".address_size 64", ".address_size 0777", ".address_size 0777 is not valid"),
    ("%r<26>;", "%r<0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF>;", "does not fit in 64 bits"),
    ("%r<26>;", "%r<0x7FFFFFFF>;", "register count %r<N> 0x7FFFFFFF is out of range: it must be 0..16,777,215"),
    (".address_size 64", '.address_size 64\n.file 0xfffffffffffffff "a.cu"', ".file index 0xfffffffffffffff is out of range"),
    (".loc\t1 9 5", ".loc 1 1099511627776 5", ".loc line 1099511627776 is out of range: it must be 0..2,147,483,647"),
    (".loc\t1 9 5", ".loc 9223372036854775807 112 3", ".loc file index 9223372036854775807 is out of range"),
    (".loc\t1 9 5", ".loc 0x8000000000000000 151 3", ".loc file index 0x8000000000000000 is out of range"),
    ("[4096];", "[0xffffffffffffffff];", "array length 0xffffffffffffffff is out of range"),
    ("bar.sync \t0;", "cp.async.ca.shared.global [%r16], [%rd8], -2147483649, 12;\n\tbar.sync 0;",
     "copy size operand -2147483649 is out of range: it must be 1..32,767"),
    (".align 4 .b8", ".align 3 .b8", ".align 3 is not a power of two"),
]


@pytest.mark.parametrize("old, new, message", NUMBER_EDGES, ids=[n for _, n, _ in NUMBER_EDGES])
def test_numbers_at_the_edges_are_located_errors(tmp_path, old, new, message):
    path = _edited(tmp_path, old, new)
    result = _run("analyze", path, "--block", "32,8")
    _clean_error(result, message)
    assert result.stderr.startswith(f"{path}:")


def test_most_negative_offset_wraps_like_the_hardware(tmp_path):
    """``[r+-0x8000000000000000]``: negating INT64_MIN is INT64_MIN in two's complement, not an overflow."""
    path = _edited(tmp_path, "st.shared.f32 \t[%r16+1024], %f2;", "st.shared.f32 [%rd8+-0x8000000000000000], %f2;")
    result = _run("analyze", path, "--block", "32,8")
    assert "Traceback" not in result.stderr and result.returncode in (0, 2), result.stderr


# ---------------------------------------------------------------------------
# Traces and rule files
# ---------------------------------------------------------------------------

TRACES = Path(__file__).resolve().parents[1] / "traces"


def _replaced(source: Path, target: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text
    target.write_text(text.replace(old, new, 1))
    return target


def test_corrupt_parquet_is_a_clean_error(tmp_path):
    data = bytearray((TRACES / "canonical.parquet").read_bytes())
    for i in range(200, len(data) - 200, 37):
        data[i] ^= 0x5A
    (tmp_path / "c.parquet").write_bytes(bytes(data))
    (tmp_path / "t.parquet").write_bytes((TRACES / "canonical.parquet").read_bytes()[:3000])
    for name in ("c.parquet", "t.parquet"):
        _clean_error(_run("analyze", tmp_path / name), f"{name}: ")


@pytest.mark.parametrize("old, new, message", [
    ("-grid dim = (2,1,1)", "-grid dim = (99999999999999999999999,1,1)", "-grid dim x 99999999999999999999999 is out of range"),
    ("-shmem = 16384", "-shmem = 99999999999999999999999999999", "-shmem 99999999999999999999999999999 is out of range"),
])
def test_huge_accelsim_header_numbers(tmp_path, old, new, message):
    path = _replaced(TRACES / "accelsim-v4-mode0.traceg", tmp_path / "k.traceg", old, new)
    _clean_error(_run("analyze", path), message)


@pytest.mark.parametrize("old, new, message", [
    ("grid size 2,1,1", "grid size 99999999999999999999999,1,1", ":3:1: LAUNCH line: grid x 99999999999999999999999"),
    ("CTA 0,0,0 - warp 1 - STS", "CTA 0,0,0 - warp 99999999999999999999999 - STS", ":14:1: kernel bank_patterns (_Z13bank_patternsPf): warp"),
])
def test_huge_nvbit_numbers(tmp_path, old, new, message):
    path = _replaced(TRACES / "nvbit-memtrace.log", tmp_path / "m.log", old, new)
    _clean_error(_run("analyze", path), message)


def test_truncated_xz_names_the_file(tmp_path):
    data = (TRACES / "accelsim-kernelslist" / "kernel-2.traceg.xz").read_bytes()
    (tmp_path / "k.traceg.xz").write_bytes(data[:300])
    result = _run("analyze", tmp_path / "k.traceg.xz")
    _clean_error(result, "k.traceg.xz: ")
    assert ":0:" not in result.stderr


def test_missing_kernel_file_keeps_the_kernels_after_it(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("kernel-1.traceg", "kernel-2.traceg.xz"):
        (folder / name).write_bytes((TRACES / "accelsim-kernelslist" / name).read_bytes())
    listing = (TRACES / "accelsim-kernelslist" / "kernelslist.g").read_text()
    first = next(line for line in listing.splitlines() if line.startswith("kernel"))
    (folder / "kernelslist.g").write_text(listing.replace(first, "kernel-9.traceg\n" + first, 1))
    result = _run("analyze", folder / "kernelslist.g", "-f", "json")
    _clean_error(result, "kernel trace kernel-9.traceg not found")
    import json
    assert len(json.loads(result.stdout)["results"]) == sum(1 for line in listing.splitlines()
                                                            if line.startswith("kernel"))


def test_kernelslist_naming_a_non_trace_file_does_not_echo_it(tmp_path):
    secret = tmp_path / "kernel-secret.traceg"
    secret.write_text("password = hunter2\nmore private text\n")
    folder = tmp_path / "run"
    (folder / "kernel-dir.trace").mkdir(parents=True)
    (folder / "kernelslist.g").write_text("kernel-dir.trace/../../kernel-secret.traceg\n")
    result = _run("analyze", folder / "kernelslist.g")
    _clean_error(result, "kernel-secret.traceg is outside the kernelslist's folder and not an Accel-Sim trace")
    assert "hunter2" not in result.stderr + result.stdout
    trace = (TRACES / "accelsim-kernelslist" / "kernel-1.traceg").read_bytes()
    secret.write_bytes(trace)                    # a trace file outside the folder is read
    assert _run("analyze", folder / "kernelslist.g").returncode == 0


@pytest.mark.parametrize("content, message", [
    (b'name = "x"\n\xff\xfe bad\n', ":2:1: not a TOML rule file: byte 0xff is not UTF-8 text"),
    (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), "not a TOML rule file"),
    (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
])
def test_hostile_rule_files(tmp_path, content, message):
    rule_file = tmp_path / "r.toml"
    rule_file.write_bytes(content)
    _clean_error(_run("devices", rule_file), message)
    result = _run("analyze", TRANSPOSE, "--block", "32,8", "--device", rule_file)
    _clean_error(result, message)
    assert "RuleSet(" not in result.stderr and len(result.stderr.splitlines()) <= 3


# ---------------------------------------------------------------------------
# Launch limits
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--block", "4096"], "4,096 threads: more than 1,024 per block, the sm_90 limit (CUDA C++ Programming Guide"),
    (["--block", "1000000"], "more than 1,024 per block"),
    (["--block", "32,8", "--grid", "2147483648"], "grid x = 2,147,483,648 exceeds 2,147,483,647"),
    (["--block", "32,8", "--grid", "1,65536"], "grid y = 65,536 exceeds 65,535"),
    (["--block", "32,8", "--dynamic-smem", str(1 << 40)], "bytes of shared memory (static + --dynamic-smem): more than 232,448"),
])
def test_launches_the_hardware_refuses(args, message):
    _clean_error(_run("analyze", TRANSPOSE, *args), message)


def test_largest_grid_on_a_cta_dependent_kernel_ends_cleanly():
    """`--grid 65535,65535,64` (2^38 CTAs, within every limit) on a kernel whose accesses depend on %ctaid: once a
    2 TiB allocation traceback; now a clean end (counted, or one located line per kernel), never a crash or a kill.
    The address space is capped so that a regression fails here instead of exhausting the machine."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))

    kernel = FIXTURES / "scale" / "ctaid.sm_90.ptx"
    result = subprocess.run([sys.executable, "-m", "traceconf", "analyze", str(kernel), "-k", "ctaid_row",
                             "--block", "256", "--grid", "65535,65535,64", "--param", "2=64", "--level", "ptx"],
                            capture_output=True, text=True, timeout=300, preexec_fn=cap)
    assert result.returncode in (0, 2) and "Traceback" not in result.stderr, result.stderr
    assert all(line.startswith(f"{kernel}") for line in result.stderr.splitlines()), result.stderr


def test_huge_static_shared_array_is_refused_before_emulation(tmp_path):
    path = _edited(tmp_path, "[4096];", "[1099511627775];")
    _clean_error(_run("analyze", path, "--block", "32,8"),
                 "needs 1,099,511,627,775 bytes of shared memory (static + --dynamic-smem): more than 232,448")


def test_a_device_that_cannot_run_the_launch_is_noted_the_others_count():
    result = _run("analyze", TRANSPOSE, "--block", "1024", "-d", "sm_1x", "-d", "sm_90", "-f", "json")
    assert result.returncode == 0, result.stderr
    import json
    document = json.loads(result.stdout)
    assert {r["device"] for r in document["results"]} == {"sm_1x", "sm_90"}


def test_limits_come_from_the_rule_sets():
    from traceconf.rules import builtin_names, load_rule_set
    for name in builtin_names():
        limits = load_rule_set(name).limits
        assert limits is not None and limits.source, name
        assert limits.threads_per_block <= 1024 and limits.shared_bytes_per_block <= 256 * 1024
    assert load_rule_set("sm_1x").limits.threads_per_block == 512
    assert load_rule_set("sm_90").limits.shared_bytes_per_block == 227 * 1024


def test_bad_limits_table_is_a_rule_file_error(tmp_path):
    from traceconf.rules import RuleFileError, load_rule_set
    base = (Path(__file__).resolve().parents[1] / "traceconf" / "rules" / "sm_90.toml").read_text()
    rule_file = tmp_path / "x.toml"
    rule_file.write_text(base.replace("threads_per_block = 1024", "threads_per_block = -1"))
    with pytest.raises(RuleFileError, match="limits.threads_per_block"):
        load_rule_set(rule_file)


def test_recursion_through_func_calls_is_noted(tmp_path):
    path = tmp_path / "rec.ptx"
    path.write_text(RECURSIVE)
    result = _run("analyze", path, "--block", "32", "-f", "json", "--level", "ptx")
    assert result.returncode == 0, result.stderr
    result = _run("analyze", path, "--block", "32", "--level", "ptx")
    assert "recursive or too deeply nested call of rec" in result.stdout
    assert "lower bound" in result.stdout


RECURSIVE = """.version 8.0
.target sm_90
.address_size 64
.shared .align 4 .b8 buf[4096];
.func rec(.param .b32 depth)
{
\t.reg .b32 %r<8>;
\t.reg .pred %p<2>;
\tld.param.b32 %r1, [depth];
\tmov.u32 %r2, %tid.x;
\tshl.b32 %r3, %r2, 7;
\tmov.u32 %r4, buf;
\tadd.s32 %r5, %r4, %r3;
\tst.shared.u32 [%r5], %r1;
\tsetp.eq.s32 %p1, %r1, 0;
\t@%p1 bra DONE;
\tadd.s32 %r6, %r1, -1;
\t{
\t.param .b32 a0;
\tst.param.b32 [a0], %r6;
\tcall rec, (a0);
\t}
DONE:
\tret;
}
.visible .entry k()
{
\t.reg .b32 %r<2>;
\tmov.u32 %r1, 3;
\t{
\t.param .b32 a0;
\tst.param.b32 [a0], %r1;
\tcall rec, (a0);
\t}
\tret;
}
"""


# ---------------------------------------------------------------------------
# Outputs: atomic, never over an input
# ---------------------------------------------------------------------------

def test_output_that_is_the_input_is_refused(tmp_path):
    trace = tmp_path / "x.parquet"
    trace.write_bytes((TRACES / "canonical.parquet").read_bytes())
    before = trace.read_bytes()
    _clean_error(_run("convert", trace, "-o", trace), "the output is the input file")
    _clean_error(_run("analyze", trace, "-o", trace), "the output is the input file")
    _clean_error(_run("analyze", trace, "-o", tmp_path / "." / "x.parquet"), "the output is the input file")
    assert trace.read_bytes() == before


def test_atomic_output_keeps_the_old_file_on_failure(tmp_path):
    from traceconf.outputs import atomic_output
    target = tmp_path / "out.parquet"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as temporary:
            temporary.write_bytes(b"half")
            raise RuntimeError("killed")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]
    with atomic_output(target) as temporary:
        temporary.write_bytes(b"new")
    assert target.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["out.parquet"]


def test_convert_killed_midway_keeps_the_previous_output(tmp_path):
    """A convert killed (SIGKILL) while writing leaves the previous output whole."""
    import signal
    import time
    big = tmp_path / "big.log"
    lines = (TRACES / "nvbit-memtrace.log").read_text().splitlines(keepends=True)
    head, body = lines[:3], [line for line in lines[3:] if " - STS - " in line or " - LDS - " in line]
    with open(big, "w") as out:
        out.writelines(head)
        for _ in range(4000):
            out.writelines(body)
    output = tmp_path / "out.parquet"
    assert _run("convert", TRACES / "canonical.parquet", "-o", output).returncode == 0
    before = output.read_bytes()
    process = subprocess.Popen([sys.executable, "-m", "traceconf", "convert", str(big), "-o", str(output)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()):
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert output.read_bytes() == before


# ---------------------------------------------------------------------------
# The last boundary: an internal error is one line, exit 70
# ---------------------------------------------------------------------------

def test_internal_error_is_one_line_and_exit_70(tmp_path, monkeypatch):
    """A bug (simulated: the emulator raising KeyError) is reported per kernel, other kernels kept."""
    from typer.testing import CliRunner

    import traceconf.emulate as emulate
    from traceconf.cli import app

    real = emulate.emulate

    def broken(module, kernel, *args, **kwargs):
        if kernel == "transpose_unpadded":
            raise KeyError(511)
        return real(module, kernel, *args, **kwargs)

    monkeypatch.setattr(emulate, "emulate", broken)
    result = CliRunner().invoke(app, ["analyze", str(TRANSPOSE), "--block", "32,8", "-f", "json", "--level", "ptx"])
    assert result.exit_code == 70
    assert "transpose_padded" in result.stdout
    assert "kernel transpose_unpadded: internal error (KeyError: 511)" in result.stderr
    assert "please report" in result.stderr and "Traceback" not in result.stderr


def test_cli_main_turns_a_bug_into_exit_70(monkeypatch, capsys):
    import traceconf.cli as cli

    def boom():
        raise TypeError("unexpected")

    monkeypatch.setattr(cli, "app", boom)
    monkeypatch.delenv("TRACECONF_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 70
    err = capsys.readouterr().err
    assert "internal error (TypeError: unexpected)" in err and "Traceback" not in err
    monkeypatch.setenv("TRACECONF_DEBUG", "1")
    with pytest.raises(SystemExit):
        cli.main()
    assert "Traceback" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# External programs: no shell, a timeout, one line
# ---------------------------------------------------------------------------

def test_missing_tool_is_one_line(monkeypatch, tmp_path):
    from traceconf import tools
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(tools, "CUDA_BIN", tmp_path / "nowhere")
    monkeypatch.setattr(tools, "wheel_bin_dirs", lambda: [])
    tools.locate.cache_clear()
    try:
        with pytest.raises(tools.ToolError, match="nvdisasm not found .searched PATH.*pip install nvidia-cuda-nvdisasm"):
            tools.run_tool("nvdisasm", ["--help"])
    finally:
        tools.locate.cache_clear()


def test_only_the_tools_module_starts_programs():
    """Every external program runs through traceconf.tools.run_tool (no shell, a timeout, its own folder)."""
    import ast
    package = Path(__file__).resolve().parents[1] / "traceconf"
    starters = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] in ("subprocess", "pty") for n in names) or (
                    isinstance(node, ast.Attribute) and node.attr in ("system", "popen", "spawnv", "execv")
                    and isinstance(node.value, ast.Name) and node.value.id == "os"):
                starters.append(str(path.relative_to(package)))
    assert sorted(set(starters)) == ["tools.py"]


def test_failing_and_slow_tools_are_one_line(tmp_path):
    from traceconf import tools
    script = tmp_path / "tool.sh"
    script.write_text("#!/bin/sh\necho \"bad thing: $1\" >&2\n[ \"$1\" = slow ] && sleep 5\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(tools.ToolError, match=r"fake failed \(exit status 3\): bad thing: ; rm -rf x"):
        tools.run_tool("fake", ["; rm -rf x"], program=str(script))    # an argument, never shell syntax
    with pytest.raises(tools.ToolError, match="did not finish within 0.5 s"):
        tools.run_tool("fake", ["slow"], program=str(script), timeout=0.5)
    result = tools.run_tool("true", [], program="/bin/true")
    assert result.stdout == ""


# ---------------------------------------------------------------------------
# Hostile (valid but enormous) trace files
# ---------------------------------------------------------------------------

def test_decompression_bomb_stops_at_the_line_limit(tmp_path, monkeypatch):
    """An .xz that expands a thousandfold into one endless line is refused, not held in memory."""
    import lzma

    from traceconf.errors import InputError
    from traceconf.pipeline import run_trace
    from traceconf.rules import load_rule_sets
    from traceconf.traces import source

    monkeypatch.setattr(source, "MAX_LINE_BYTES", 1 << 20)
    header = (TRACES / "accelsim-v4-mode0.traceg").read_bytes().split(b"\n#traces format")[0]
    bomb = tmp_path / "bomb.traceg.xz"
    bomb.write_bytes(lzma.compress(header + b"\n" + b"A" * (8 << 20)))
    assert bomb.stat().st_size * 1000 < 8 << 20
    with pytest.raises(InputError, match="runs past 1 MiB without a newline"):
        _, failures = run_trace(bomb, None, load_rule_sets(["sm_90"]))
        raise failures[0].error


def test_parquet_claiming_huge_row_groups_is_refused_before_reading(tmp_path, monkeypatch):
    from traceconf.errors import InputError
    from traceconf.pipeline import run_trace
    from traceconf.rules import load_rule_sets
    from traceconf.traces import canonical

    monkeypatch.setattr(canonical, "MAX_ROW_GROUP_ROWS", 10)
    _, failures = run_trace(TRACES / "canonical.parquet", None, load_rule_sets(["sm_90"]))
    assert failures and "row group 0 claims" in failures[0].error.message
    assert isinstance(failures[0].error, InputError)


def test_wrong_operand_count_is_a_located_error(tmp_path):
    """Found by scripts/fuzz_ptx.py: the parser takes any operand list; the emulator reports the line."""
    path = _edited(tmp_path, "add.s32 \t%r6, %r4, %r5;", "add.s32 %r6, %r4, %r, 5;")
    result = _run("analyze", path, "--block", "32,8", "--level", "ptx")
    _clean_error(result, ": kernel transpose_unpadded: cannot emulate add with these 4 operand(s)")
    assert "k.ptx:40" in result.stderr and "transpose_padded" in result.stdout


def test_too_few_source_operands_is_a_located_error(tmp_path):
    """Found by scripts/fuzz_ptx.py (shl/shr with one source): reported at compile time, at its line."""
    path = _edited(tmp_path, "shl.b32 \t%r4, %r3, 5;", "shl.b32 %r4, %r3;")
    _clean_error(_run("analyze", path, "--block", "32,8", "--level", "ptx"), "cannot emulate shl with these 2 operand(s)")


@pytest.mark.parametrize("setp, count", [("setp.lt.s32 %p1, [%r1+8192];", 2), ("setp.lt.s32 %p1, %r1;", 2),
                                         ("setp.lt.and.s32 %p1, %r1, 5;", 3)])
def test_setp_with_too_few_sources_is_a_located_error(setp, count):
    """Found by the issue-25 campaign (scripts/fuzz_ptx.py, seed 2501): ``setp`` with one source operand was
    an IndexError in the middle of a run; it is reported at compile time, at its line."""
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.errors import InputError
    from traceconf.pipeline import analyze_kernel
    from traceconf.programs.ptx import PtxProgram
    from traceconf.ptx import parse_ptx
    from traceconf.rules import load_rule_sets

    text = (".version 9.0\n.target sm_75\n.address_size 64\n.visible .entry k(\n.param .u64 k_param_0\n)\n{\n"
            f".reg .b32 %r<4>;\n.reg .pred %p<2>;\nmov.u32 %r1, %tid.x;\n{setp}\n"
            ".shared .align 4 .b8 s[256];\n@%p1 ld.shared.u32 %r2, [s];\nret;\n}\n")
    module = parse_ptx(text.encode(), "k.ptx")
    with pytest.raises(InputError) as caught:
        analyze_kernel(PtxProgram(module), "k", LaunchRequest(block=(32, 1, 1)), load_rule_sets(["sm_90"]))
    assert caught.value.file == "k.ptx" and caught.value.line == 11
    assert f"cannot emulate setp with these {count} operand(s)" in caught.value.message


def test_a_trace_no_device_can_count_names_its_file():
    """Found by the issue-25 campaign (fuzz_traces.py --seed 2502): a canonical trace whose ldmatrix no rule
    set can count was reported as ``error: kernel ...`` naming no file."""
    from traceconf.pipeline import run_trace
    from traceconf.rules import load_rule_sets
    path = Path(__file__).resolve().parent / "data" / "fuzz" / "parquet_ldmatrix_zero_matrices.parquet"
    _, failures = run_trace(path, None, load_rule_sets(["sm_90"]))
    assert failures and not failures[0].internal
    assert failures[0].error.file == str(path) and "does not fit rule set 'sm_90'" in failures[0].error.message


@pytest.mark.parametrize("name, message", [
    ("parquet_int_bits.parquet", "unreadable Parquet file: Integers with less than 8 bits not implemented"),
    ("parquet_dictionary_index.parquet", "unreadable Parquet data after row 0: Dictionary indices invalid"),
    ("parquet_schema_without_kind.parquet", "unreadable Parquet file:"),
    ("parquet_bytes_out_of_range.parquet", "row 241: kernel bank_patterns (_Z13bank_patternsPf): bytes 8200 is out of range 1..255"),
])
def test_fuzzed_parquet_files(name, message):
    """Found by scripts/fuzz_traces.py (bit flips of traces/canonical.parquet, kept in tests/data/fuzz)."""
    from traceconf.pipeline import run_trace
    from traceconf.rules import load_rule_sets
    path = Path(__file__).resolve().parent / "data" / "fuzz" / name
    _, failures = run_trace(path, None, load_rule_sets(["sm_90"]))
    assert len(failures) == 1 and not failures[0].internal
    assert message in failures[0].line()


@pytest.mark.parametrize("old, new, message", [
    ("thread block = 0,0,0", "thread block = 99999999999999999999999,0,0", ":19:1: kernel bank_patterns (_Z13bank_patternsPf): thread block index x"),
    ("thread block = 0,0,0", "thread block = 5,0,0", "thread block index x 6 is out of range 1..2"),
    ("warp = 1\n", "warp = 99999999999999999999999\n", ":41:1: kernel bank_patterns (_Z13bank_patternsPf): warp 99999999999999999999999 is out of range"),
])
def test_accelsim_structure_numbers(tmp_path, old, new, message):
    """Found by scripts/fuzz_traces.py: CTA and warp numbers of the trace body are range-checked too."""
    from traceconf.pipeline import run_trace
    from traceconf.rules import load_rule_sets
    path = _replaced(TRACES / "accelsim-v4-mode0.traceg", tmp_path / "k.traceg", old, new)
    _, failures = run_trace(path, None, load_rule_sets(["sm_90"]))
    assert failures and not failures[0].internal
    assert message in failures[0].line(), failures[0].line()


@pytest.mark.parametrize("raise_error", [
    lambda: __import__("pyarrow").lib.ArrowNotImplementedError("unsupported Parquet encoding"),
    lambda: __import__("pyarrow").lib.ArrowTypeError("column of another type"),
    lambda: __import__("pyarrow").lib.ArrowCapacityError("array too large"),
    lambda: __import__("zstandard").ZstdError("corrupted block detected"),
    lambda: __import__("lzma").LZMAError("Corrupt input data"),
    lambda: __import__("struct").error("unpack requires a buffer of 8 bytes"),
], ids=["arrow-not-implemented", "arrow-type", "arrow-capacity", "zstd", "lzma", "struct"])
def test_every_library_data_error_becomes_a_located_message(raise_error):
    """Issue 25: a library's error class that is not a builtin ValueError/OSError (pyarrow.ArrowException
    and its kin, zstandard, lzma, struct) is the input's fault, located at the input, never an internal error."""
    from traceconf.errors import InputError, data_errors, reading

    error = raise_error()
    assert isinstance(error, data_errors())
    with pytest.raises(InputError) as caught:
        with reading("in.parquet", line=3):
            raise error
    assert str(caught.value).startswith("in.parquet:3: cannot read") and "\n" not in str(caught.value)


def test_the_error_module_imports_no_library():
    """data_errors() names the libraries' classes without importing them (the CLI starts without pyarrow)."""
    code = "import sys, traceconf.errors as e; e.data_errors(); print('pyarrow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1]).stdout.strip() == "False"
