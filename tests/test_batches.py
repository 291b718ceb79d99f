"""CTAs of a kernel that writes global memory (--data) run in wide batches, checked at run time: the
per-instruction results must be identical to running the CTAs one at a time in launch order, also for kernels
whose CTAs do communicate (a spin lock, a last-block reduction, a histogram merge) and at both levels."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import FIXTURES
from traceconf.emulate import grid
from traceconf.emulate.contents import Buffer, CrossCtaTraffic, GlobalContents
from traceconf.emulate.launch import LaunchRequest
from traceconf.pipeline import run_file
from traceconf.rules import load_rule_set
from traceconf.sass.toolchain import locate

EMULATE = FIXTURES / "emulate"
WORDS = 4096


def _inputs(tmp_path) -> dict[str, str]:
    rng = np.random.default_rng(7)
    files = {"zeros": np.zeros(1 << 14, np.uint32), "words": rng.integers(0, 2**32, WORDS, dtype=np.uint32),
             "bytes": rng.integers(0, 256, 1 << 14, dtype=np.uint8), "lock": np.zeros(1, np.int32),
             "counter": np.zeros(33, np.int32)}
    for name, array in files.items():
        np.save(tmp_path / f"{name}.npy", array)
    return {name: str(tmp_path / f"{name}.npy") for name in files}


#: (fixture, kernel, block, grid, params, data: parameter -> input) of kernels that write global memory; the
#: first three communicate
LAUNCHES = [
    ("spin_lock", "spin_lock", 32, 6, {}, {"0": "lock", "1": "counter"}),
    ("communicate", "last_block_sum", 256, 16, {}, {"0": "words", "1": "zeros", "2": "zeros", "3": "zeros",
                                                   "4": "zeros"}),
    ("communicate", "histogram_merge", 128, 60, {}, {"0": "bytes", "1": "zeros", "2": "zeros", "3": "zeros"}),
    # CTAs that never read what another wrote: one batch each
    ("samples", "histogram64", 64, 9, {"2": WORDS}, {"0": "zeros", "1": "words"}),
    ("samples", "histogram256", 192, 7, {"2": WORDS}, {"0": "zeros", "1": "words"}),
    ("samples", "bitonic_sort_shared", 512, 3, {"4": 1024, "5": 1}, {"0": "zeros", "1": "zeros", "2": "words",
                                                                    "3": "words"}),
]


def _analyse(level: str, fixture: str, kernel: str, block: int, grid_x: int, params: dict, data: dict,
             inputs: dict):
    request = LaunchRequest(block=(block, 1, 1), grid=(grid_x, 1, 1), params=dict(params),
                            data={key: inputs[name] for key, name in data.items()})
    path = EMULATE / f"{fixture}.ptx"
    rules = [load_rule_set("sm_90")]
    done, failed = run_file(path, [kernel], request, rules, level=level)
    assert not failed, failed
    (analysis,) = done
    return analysis


@pytest.mark.parametrize("level", ["ptx", "sass"])
@pytest.mark.parametrize("launch", LAUNCHES, ids=[f"{f}-{k}" for f, k, *_ in LAUNCHES])
def test_batches_count_exactly_what_launch_order_counts(monkeypatch, tmp_path, level, launch):
    if level == "sass" and locate("ptxas") is None:
        pytest.skip("no ptxas")
    inputs = _inputs(tmp_path)
    undone = []
    restore = GlobalContents.restore
    monkeypatch.setattr(GlobalContents, "restore", lambda self, saved: undone.append(1) or restore(self, saved))
    batched = _analyse(level, *launch, inputs)
    assert bool(undone) == (launch[0] != "samples")      # communicating batches were caught, the others stood
    monkeypatch.setattr(grid, "CHUNK_THREADS", 1)        # one CTA per batch: plain launch order
    ordered = _analyse(level, *launch, inputs)
    assert "partial" not in batched.launch and batched.launch == ordered.launch
    assert batched.results.equals(ordered.results), (batched.results.to_pandas(), ordered.results.to_pandas())
    assert batched.unresolved == ordered.unresolved and batched.notes == ordered.notes


def test_a_batch_whose_ctas_communicate_is_caught_and_run_in_parts(tmp_path):
    """The spin lock: every CTA's thread 0 takes the same lock, so no batch of two CTAs can stand."""
    memory = GlobalContents([Buffer("p", 0, np.zeros(16, np.uint8), np.zeros(16, np.uint8), np.dtype(np.uint8),
                                    "")])
    lanes_cta = np.array([0, 1])
    memory.watch(lanes_cta)
    memory.note(0, np.array([0]), 4, np.array([0]), writes=False)     # CTA 0 reads bytes 0..3
    memory.note(0, np.array([0]), 4, np.array([1]), writes=False)     # CTA 1 too: reading is not talking
    memory.note(0, np.array([8]), 4, np.array([1]), writes=True)      # CTA 1 writes its own bytes
    memory.note(0, np.array([8]), 4, np.array([1]), writes=False)     # and reads them back
    with pytest.raises(CrossCtaTraffic):
        memory.note(0, np.array([8]), 4, np.array([0]), writes=False)  # CTA 0 reads what CTA 1 wrote
    memory.watch(lanes_cta)
    with pytest.raises(CrossCtaTraffic):
        memory.note(0, np.array([0, 2]), 4, np.array([0, 1]), writes=True)  # one write, two CTAs, bytes 2..3
    memory.watch(lanes_cta)
    memory.note(0, np.array([4]), 4, np.array([0]), writes=False)
    with pytest.raises(CrossCtaTraffic):
        memory.note(0, np.array([4]), 4, np.array([1]), writes=True)   # CTA 1 writes what CTA 0 read
    memory.watch(None)
    memory.note(0, np.array([4]), 4, np.array([1]), writes=True)       # one CTA: nothing to check


@pytest.mark.parametrize("level", ["ptx", "sass"])
def test_batched_ctas_share_address_rows_and_keep_every_address(monkeypatch, tmp_path, level):
    """The bitonic sort's conditional swaps store at addresses from the thread index, in lanes the data choose:
    a batch logs one address row per warp of a CTA (AddressPatterns), and the addresses built from the rows and
    the masks are those of each CTA run alone."""
    if level == "sass" and locate("ptxas") is None:
        pytest.skip("no ptxas")
    inputs = _inputs(tmp_path)
    fixture, kernel, block, _, params, data = LAUNCHES[-1]
    request = LaunchRequest(block=(block, 1, 1), grid=(4, 1, 1), params=dict(params), retain=-1,
                            data={key: inputs[name] for key, name in data.items()})
    rules = [load_rule_set("sm_90")]

    def accesses():
        (analysis,), failed = run_file(EMULATE / f"{fixture}.ptx", [kernel], request, rules, level=level)
        assert not failed
        acc = analysis.accesses[32]
        order = np.lexsort((np.arange(len(acc)), acc.instruction, acc.warp, acc.cta))
        return acc, acc.take(order)

    batched, in_order = accesses()
    after_probe = batched.cta > 0                                   # CTA 0 runs alone, the other 3 together
    assert len(np.unique(batched.patterns.index[after_probe])) * 2 < after_probe.sum()   # rows shared
    assert len({m for m in batched.patterns.mask.tolist()}) > 8      # and data-dependent masks
    monkeypatch.setattr(grid, "CHUNK_THREADS", 1)
    _, alone = accesses()
    for name in ("cta", "warp", "instruction", "kind", "bytes", "address"):
        assert np.array_equal(getattr(in_order, name), getattr(alone, name)), name


@pytest.mark.parametrize("level", ["ptx", "sass"])
def test_a_batch_keeps_at_most_batch_shared_bytes_of_shared_contents(monkeypatch, tmp_path, level):
    """Batches are cut by the shared bytes whose contents they keep (BATCH_SHARED_BYTES: contents and taints
    stay in a core's L2 cache), and count what launch order counts."""
    if level == "sass" and locate("ptxas") is None:
        pytest.skip("no ptxas")
    inputs = _inputs(tmp_path)
    launch = LAUNCHES[4]                                           # histogram256: 7 CTAs, 6 KiB of shared each
    sizes = []
    run = grid._Runner.run
    monkeypatch.setattr(grid._Runner, "run", lambda self, ctas, watched=False: sizes.append(len(ctas)) or
                        run(self, ctas, watched))
    wide = _analyse(level, *launch, inputs)
    assert sizes == [1, 6]                                         # the probe, then every other CTA at once
    sizes.clear()
    monkeypatch.setattr(grid, "BATCH_SHARED_BYTES", 2 * 6144 + 100)
    cut = _analyse(level, *launch, inputs)
    assert sizes == [1, 2, 2, 2]
    assert cut.results.equals(wide.results) and cut.launch == wide.launch
