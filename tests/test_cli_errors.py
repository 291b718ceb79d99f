"""Bad input on the command line: one clear line, exit status 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from traceconf import tools

needs_ptxas = pytest.mark.skipif(tools.locate("ptxas") is None or tools.locate("nvdisasm") is None,
                                 reason="needs ptxas and nvdisasm")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "traceconf", *args], capture_output=True, text=True)


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "empty.ptx").write_bytes(b"")
    (tmp_path / "garbage.ptx").write_bytes(bytes(range(256)) * 3)
    (tmp_path / "garbage.bin").write_bytes(bytes(range(256)) * 3)
    return tmp_path


@pytest.mark.parametrize("name, message", [
    ("empty.ptx", "empty.ptx:1:1: empty file"),
    ("garbage.ptx", "garbage.ptx: not PTX"),
    ("garbage.bin", "garbage.bin: unrecognised trace format"),
    ("missing.ptx", "missing.ptx: no such file"),
])
def test_unreadable_inputs(files, name, message):
    result = _run("analyze", str(files / name), "--block", "32")
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3


@pytest.mark.parametrize("args, message", [
    (["--block", "32,x"], "--block: expected X[,Y[,Z]] of whole numbers, got '32,x'"),
    (["--block", "32", "--device", "nosuch"], "--device: unknown device 'nosuch'"),
    (["--block", "32", "--device", "127"], "--device: unknown device '127'"),   # found by fuzz_surfaces.py (cli)
    (["--block", "32", "--grid", "0x8000000000000000"], "cannot run: grid x = 9,223,372,036,854,775,808"),
    (["--block", "32", "--grid", "0x8000000000000000"], "(the launch: --block, --grid, --dynamic-smem"),  # (cli)
    (["--block", "32", "--param", "oops"], "--param: expected NAME_OR_INDEX=VALUE"),
    (["--block", "32", "--launches", "\n\n"], "--launches: no file named: the value is blank"),   # (issue 25)
    (["--block", "32", "--device", "18446744\\073709551616"],        # a backslash makes it a path (cli surface)
     "18446744\\073709551616: cannot read rule file: No such file"),
])
def test_bad_options(args, message):
    from tests.conftest import FIXTURES
    result = _run("analyze", str(FIXTURES / "emulate" / "transpose.ptx"), *args)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


@pytest.fixture()
def data_files(tmp_path):
    import numpy as np
    np.save(tmp_path / "short.npy", np.zeros(100, np.uint8))
    np.save(tmp_path / "floats.npy", np.zeros(8192, np.float32))
    np.save(tmp_path / "good.npy", np.zeros(8192, np.uint8))
    (tmp_path / "odd.bin").write_bytes(b"abc")
    return tmp_path


@pytest.mark.parametrize("data, message", [
    ("0={d}/missing.npy", "missing.npy: kernel hist256 (_Z7hist256PKhPji): --data 0: no such file"),
    ("nosuch={d}/good.npy", "--data nosuch: no selected kernel has such a parameter"),
    ("7={d}/good.npy", "--data 7: no selected kernel has such a parameter"),
    ("0=random:u7:100", "--data 0: kernel hist256 (_Z7hist256PKhPji): unknown dtype 'u7'"),
    ("0=random:u8", "--data 0: kernel hist256 (_Z7hist256PKhPji): expected random:DTYPE:COUNT[:LOW:HIGH]"),
    ("0={d}/odd.bin:uint16", "odd.bin: kernel hist256 (_Z7hist256PKhPji): --data 0: 3 bytes is not a whole number of uint16 elements"),
    ("0={d}/short.npy", "reads bytes 100..100 of parameter _Z7hist256PKhPji_param_0, but --data gives it only "
                        "100 bytes"),
    ("0={d}/floats.npy", "reads .u8 values from parameter _Z7hist256PKhPji_param_0, but --data gives it float32"),
    ("0", "--data: expected NAME_OR_INDEX=SOURCE"),
])
@pytest.mark.parametrize("level", ["ptx", pytest.param("sass", marks=needs_ptxas)])
def test_bad_data(data_files, data, message, level):
    """The same one line at both levels (at the SASS level a load is named by its pc)."""
    result = _bad_data(data_files, data, level)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3


def test_help_lists_every_exit_status():
    from traceconf.errors import EXIT_GATE, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_UNVERIFIABLE
    text = " ".join(_run("--help").stdout.split())
    for status, meaning in ((EXIT_OK, "ok"), (EXIT_GATE, "--fail-on-excess exceeded"), (EXIT_INPUT, "bad input"),
                            (EXIT_UNVERIFIABLE, "--fail-on-excess unverifiable"), (EXIT_INTERNAL, "internal error")):
        assert f"{status} {meaning}" in text, (status, meaning)


def _bad_data(data_files, data: str, level: str) -> subprocess.CompletedProcess:
    from tests.conftest import FIXTURES
    return _run("analyze", str(FIXTURES / "cuda" / "datadep.sm_90.ptx"), "-k", "hist256", "--block", "256",
                "--grid", "2", "--param", "2=8192", "--data", data.format(d=data_files), "--level", level)


@needs_ptxas
@pytest.mark.parametrize("data", ["0={d}/short.npy", "0={d}/floats.npy"])
def test_bad_data_at_sass_level_is_located_at_the_ptx_line_of_the_load(data_files, data):
    """The SASS came from the PTX: the error names the PTX line ptxas recorded for the LDG, as the PTX level does."""
    import re
    where = {level: _bad_data(data_files, data, level).stderr.split(": kernel ")[0] for level in ("ptx", "sass")}
    assert re.fullmatch(r".*datadep\.sm_90\.ptx:\d+", where["ptx"]) and where["sass"] == where["ptx"], where


def test_a_file_name_with_a_line_break_stays_one_line():
    """Found by the issue-25 campaign (cli surface): a value with a newline and U+2028 taken as an input file
    ('--output --ptxas-option 33\\n\\u2028 -1') split the refusal over lines; the name is quoted, escaped."""
    result = _run("analyze", "33\n\u2028 -1", "--block", "32")
    assert result.returncode == 2 and result.stderr.strip() == "'33\\n\\u2028 -1': no such file", result.stderr


def test_a_file_name_with_leading_space_is_quoted():
    """Found by the issue-25 campaign (cli surface): '--output --block " 0xffffffffffffffff"' made the value an
    input file; its name, leading space and all, is quoted so the refusal shows it whole."""
    result = _run("analyze", " 0xffffffffffffffff", "--block", "32")
    assert result.returncode == 2 and result.stderr.strip() == "' 0xffffffffffffffff': no such file", result.stderr
