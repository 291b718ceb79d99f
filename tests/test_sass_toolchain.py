"""Finding and running NVIDIA's tools: search order, caching, one-line errors."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from traceconf.errors import InputError
from traceconf import tools
from traceconf.sass import toolchain

REPO = Path(__file__).resolve().parents[1]


def _fake_tool(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """Empty PATH/CUDA_HOME, a private cache, no wheel folders, and a fresh find_tool cache."""
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("TRACECONF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tools, "wheel_bin_dirs", lambda: [tmp_path / "wheel" / "bin"])
    monkeypatch.setattr(tools, "search_dirs", _without_system(tools.search_dirs))
    tools.locate.cache_clear()
    toolchain.tool_version.cache_clear()
    yield tmp_path
    tools.locate.cache_clear()
    toolchain.tool_version.cache_clear()


def _without_system(search):
    return lambda: [d for d in search() if d != Path("/usr/local/cuda/bin")]


def test_search_order_path_then_cuda_home_then_wheels(isolated):
    assert tools.locate("ptxas") is None
    wheel = _fake_tool(isolated / "wheel" / "bin", "ptxas", "exit 0\n")
    tools.locate.cache_clear()
    assert tools.locate("ptxas") == str(wheel)
    home = _fake_tool(isolated / "cuda" / "bin", "ptxas", "exit 0\n")
    tools.locate.cache_clear()
    assert tools.locate("ptxas") == str(home)
    first = _fake_tool(isolated / "path", "ptxas", "exit 0\n")
    tools.locate.cache_clear()
    assert tools.locate("ptxas") == str(first)


def test_missing_tool_names_how_to_get_it(isolated):
    with pytest.raises(InputError, match=r"ptxas not found .*pip install nvidia-cuda-nvcc"):
        tools.find_tool("ptxas")


def test_assemble_runs_ptxas_once_per_ptx_arch_and_options(isolated):
    log = isolated / "calls.log"
    # a stand-in ptxas: records its arguments, writes "-o FILE" with the arguments as content
    _fake_tool(isolated / "path", "ptxas", f'echo "$@" >> {log}\n'
               'while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then shift; echo cubin > "$1"; fi; shift; done\n')
    tools.locate.cache_clear()
    ptx = b".version 8.0\n.target sm_90\n"
    assert toolchain.assemble(ptx, "sm_90") == b"cubin\n"
    assert toolchain.assemble(ptx, "sm_90") == b"cubin\n"
    def calls():
        return [line for line in log.read_text().splitlines() if line != "--version"]
    assert len(calls()) == 1                   # the second call came from the cache
    toolchain.assemble(ptx, "sm_90", ["-O1"])
    toolchain.assemble(ptx, "sm_80")
    calls = calls()
    assert len(calls) == 3 and "-arch=sm_90 -lineinfo -O1" in calls[1] and "-arch=sm_80" in calls[2]
    assert (isolated / "cache" / "ptxas").is_dir()


def test_tool_failures_are_one_line_and_located(isolated):
    _fake_tool(isolated / "path", "ptxas",
               'echo "ptxas /tmp/x/input.ptx, line 12; error   : Unknown symbol \'%r9\'" >&2\nexit 1\n')
    tools.locate.cache_clear()
    with pytest.raises(InputError) as caught:
        toolchain.assemble(b".version 8.0\n", "sm_90", what="k.ptx")
    assert (caught.value.file, caught.value.line) == ("k.ptx", 12)
    assert caught.value.message == "ptxas: Unknown symbol '%r9'"


def test_binary_kinds_are_recognised_by_their_magic():
    cubin = (REPO / "tests" / "data" / "sass" / "transpose.sm_90.cubin").read_bytes()
    assert toolchain.is_cubin(cubin) and toolchain.is_cuda_binary(cubin[:4])
    assert toolchain.is_cuda_binary(b"\x50\xed\x55\xba") and not toolchain.is_cubin(b"\x50\xed\x55\xba" + bytes(20))
    assert not toolchain.is_cuda_binary(b".ver")


@pytest.mark.skipif(tools.locate("nvdisasm") is None or tools.locate("ptxas") is None,
                    reason="needs nvdisasm and ptxas (nvidia-cuda-nvdisasm, the CUDA toolkit)")
def test_nvdisasm_runs_its_dataflow_pass_only_for_a_listing_whose_transfers_need_it(monkeypatch, tmp_path):
    # the pass only adds the targets of jump-table (and branch-stack) transfers: without one the listing is the
    # same without it, for a quarter less time; a BRX gets the pass, and the targets it lists
    calls = []
    original = toolchain.run_tool

    def recording(name, arguments, *rest, **options):
        calls.append(arguments)
        return original(name, arguments, *rest, **options)
    monkeypatch.setattr(toolchain, "run_tool", recording)
    switch = tmp_path / "control_flow.cubin"
    switch.write_bytes(toolchain.assemble((REPO / "tests" / "fixtures" / "differential" / "control_flow.sm_90.ptx")
                                          .read_bytes(), "sm_90"))
    for cubin, passes in [(REPO / "tests" / "data" / "sass" / "transpose.sm_90.cubin", 1), (switch, 2)]:
        calls.clear()
        listing = toolchain._nvdisasm(cubin, cubin.name, str(tmp_path))
        assert [("-ndf" in arguments) for arguments in calls] == [True, False][:passes]
        assert listing == original("nvdisasm", ["-g", "-gp", "-c", str(cubin)], cubin.name)
    assert "BRANCH_TARGETS" in listing


def test_ptxas_targets_are_kept_per_ptxas_version(isolated):
    log = isolated / "calls.log"
    version = isolated / "version"
    version.write_text("V13.0.88")
    # a stand-in ptxas: its version from a file, its targets in --help, each call logged
    _fake_tool(isolated / "path", "ptxas", f'echo "$@" >> {log}\n'
               f'if [ "$1" = "--version" ]; then read v < {version}; [ -z "$v" ] || echo "Cuda compilation tools, $v"; fi\n'
               'if [ "$1" = "--help" ]; then echo "--gpu-name  Allowed values: sm_80,sm_90,sm_90a,sm_100"; fi\n')
    tools.locate.cache_clear()

    def helps() -> int:
        return log.read_text().splitlines().count("--help")

    assert toolchain.ptxas_targets() == {"sm_80", "sm_90", "sm_90a", "sm_100"}
    toolchain.tool_version.cache_clear()                 # a new process: the version is read again
    assert toolchain.ptxas_targets() == {"sm_80", "sm_90", "sm_90a", "sm_100"} and helps() == 1
    version.write_text("V13.1.0")                        # another ptxas behind the same path
    toolchain.tool_version.cache_clear()
    assert toolchain.ptxas_targets() == {"sm_80", "sm_90", "sm_90a", "sm_100"} and helps() == 2
    version.write_text("\n")                             # no version to key on: asked every time
    for _ in range(2):
        toolchain.tool_version.cache_clear()
        toolchain.ptxas_targets()
    assert helps() == 4
