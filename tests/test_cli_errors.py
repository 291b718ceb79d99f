"""Bad input on the command line: one clear line, exit status 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest


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
    (["--block", "32", "--device", "nosuch"], "unknown device 'nosuch'"),
    (["--block", "32", "--param", "oops"], "--param: expected NAME_OR_INDEX=VALUE"),
])
def test_bad_options(args, message):
    from tests.conftest import FIXTURES
    result = _run("analyze", str(FIXTURES / "emulate" / "transpose.ptx"), *args)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
