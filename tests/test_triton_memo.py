"""traceconf.triton.memo: a launch analysed before is read back, anything that changes the result is not."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

triton = pytest.importorskip("triton", reason="Triton is not installed (pip install 'traceconf[triton]')")

import traceconf.triton as tt  # noqa: E402
from traceconf import api  # noqa: E402
from traceconf.triton import memo  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures" / "triton"))
import kernels  # noqa: E402


@pytest.fixture
def caches(tmp_path, monkeypatch):
    """Fresh Triton and traceconf caches; returns the folder of kept analyses."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("TRACECONF_CACHE", str(tmp_path / "traceconf"))
    return tmp_path / "traceconf" / "analyses"


@pytest.fixture
def counted(monkeypatch):
    """Counts the SASS analyses actually run."""
    calls = []
    real = api.analyze_sass

    def analyze_sass(*args, **kwargs):
        calls.append(kwargs.get("grid"))
        return real(*args, **kwargs)
    monkeypatch.setattr(api, "analyze_sass", analyze_sass)
    return calls


def transpose(x, grid=(4, 4), **options):
    return tt.analyze(kernels.transpose, grid, x, x, *x.shape, BLOCK=64, **options)


def test_the_same_launch_is_read_back(caches, counted):
    x = np.zeros((256, 256), np.float32)
    first = transpose(x)
    again = transpose(x)
    assert len(counted) == 1 and len(list(caches.glob("*.parquet"))) == 1
    pd.testing.assert_frame_equal(pd.DataFrame(first), pd.DataFrame(again))
    assert first.attrs == again.attrs and first.attrs["launch"]["grid"] == [4, 4, 1]
    assert again.explain().svg.startswith("<svg")


def test_what_changes_the_result_is_analysed_again(caches, counted):
    x = np.zeros((256, 256), np.float32)
    transpose(x)
    transpose(x, grid=(2, 4))                                   # the launch
    transpose(np.zeros((128, 256), np.float32), grid=(2, 4))    # a scalar parameter
    transpose(x, device="sm_80")                                # the rule set (and Triton's target)
    transpose(x, num_warps=8)                                   # the cubin
    assert len(counted) == 5


def test_keys_cover_contents_rules_and_code():
    cubin, block, grid, params = b"\x7fELF...", (128, 1, 1), (4, 1, 1), {0: 1, 2: 256}
    key = memo.launch_key(cubin, "k", block, grid, params, 0, "sm_90", {})
    assert key == memo.launch_key(cubin, "k", block, grid, dict(reversed(params.items())), 0, "sm_90", {})
    data = {0: np.arange(4, dtype=np.int32)}
    others = [memo.launch_key(cubin + b"\0", "k", block, grid, params, 0, "sm_90", {}),
              memo.launch_key(cubin, "k2", block, grid, params, 0, "sm_90", {}),
              memo.launch_key(cubin, "k", block, grid, {0: 1, 2: 255}, 0, "sm_90", {}),
              memo.launch_key(cubin, "k", block, grid, params, 16, "sm_90", {}),
              memo.launch_key(cubin, "k", block, grid, params, 0, "sm_86", {}),
              memo.launch_key(cubin, "k", block, grid, params, 0, "sm_90", data),
              memo.launch_key(cubin, "k", block, grid, params, 0, "sm_90", {0: data[0].astype(np.int64)}),
              memo.launch_key(cubin, "k", block, grid, params, 0, "sm_90", {0: data[0][::-1]})]
    assert len({key, *others}) == len(others) + 1
    assert len(memo.code_digest()) == 64


def test_incomplete_results_are_not_kept_and_damaged_entries_are_replaced(caches):
    failed = pd.DataFrame({"wavefronts": [1]})
    failed.attrs["failures"] = ["x.cubin: something"]
    assert memo.remembered("a" * 64, lambda: failed) is failed
    partial = pd.DataFrame({"wavefronts": [1]})
    partial.attrs["partial"] = ["k: memory limit"]
    memo.remembered("b" * 64, lambda: partial)
    assert not caches.exists() or not list(caches.iterdir())
    complete = pd.DataFrame({"wavefronts": [2]})
    memo.remembered("c" * 64, lambda: complete)
    (caches / f"{'c' * 64}.parquet").write_bytes(b"PAR1 damaged")
    assert memo.remembered("c" * 64, lambda: complete).wavefronts.tolist() == [2]
    pd.testing.assert_frame_equal(memo.remembered("c" * 64, lambda: None), complete)
