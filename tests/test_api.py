"""The pandas API: traceconf.analyze_ptx / traceconf.analyze_trace."""

from __future__ import annotations

import pytest

import traceconf
from conftest import FIXTURES, shared_path
from test_report_support import transpose_analysis
from traceconf import api
from traceconf.errors import InputError
from traceconf.pipeline import KernelFailure
from traceconf.analyses.results import RESULT_ROWS


def test_analyze_trace_frame_has_the_documented_columns():
    trace = shared_path("traces", "microgpusim-matrixmul", "kernelslist.g")
    frame = traceconf.analyze_trace(trace, devices=("sm_90", "sm_1x"))
    assert list(frame.columns) == RESULT_ROWS.names
    assert set(frame.device) == {"sm_90", "sm_1x"}
    sm90 = frame[frame.device == "sm_90"]
    assert sm90.wavefronts.sum() == 1600 and sm90.excess_wavefronts.sum() == 0
    assert frame.attrs["failures"] == []


def test_failures_are_kept_beside_the_results(monkeypatch):
    def run_file(path, kernels, launch, rule_sets, **options):
        assert launch.block == (32, 8, 1) and launch.params == {"0": 5, "n": 16}
        return [transpose_analysis()], [KernelFailure("bad", InputError("boom", "k.ptx", 3, 1))]

    monkeypatch.setattr(api, "run_file", run_file)
    with pytest.warns(UserWarning, match="k.ptx:3:1: kernel bad: boom"):
        frame = traceconf.analyze_ptx("k.ptx", block=(32, 8), params={0: 5, "n": 0x10})
    assert frame.attrs["failures"] == ["k.ptx:3:1: kernel bad: boom"]
    assert len(frame) == 10


def test_every_kernel_failing_raises(monkeypatch):
    monkeypatch.setattr(api, "run_file", lambda *a, **options: ([], [KernelFailure("bad", InputError("boom", "k.ptx", 3))]))
    with pytest.raises(InputError, match="boom"):
        traceconf.analyze_ptx("k.ptx", block=32)


@pytest.mark.parametrize("kwargs, message", [({"block": (0,)}, "block must be"),
                                             ({"block": 32, "devices": ["no_such_gpu"]}, "no_such_gpu")])
def test_bad_arguments(kwargs, message):
    with pytest.raises(InputError, match=message):
        traceconf.analyze_ptx(FIXTURES / "emulate" / "transpose.ptx", **kwargs)
