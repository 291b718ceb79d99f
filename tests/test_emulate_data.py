"""Data-dependent control flow: sound partial counts without data, exact with it (issue 12).

``tests/fixtures/emulate/bitonic_swap.cu`` swaps keys and values in shared memory under
``if ((keys[pos] > keys[pos + stride]) == up)``, as the CUDA samples' bitonicSortShared does.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from traceconf.emulate.launch import LaunchRequest
from traceconf.pipeline import run_file
from traceconf.rules import load_rule_set

PTX = Path(__file__).resolve().parent / "fixtures" / "emulate" / "bitonic_swap.ptx"
KERNEL = "_Z19bitonic_swap_sharedPKjS0_PjS1_"
N, THREADS = 1024, 512
STEPS = sum(range(1, 11))          # sizes 2..1024: 1 + 2 + ... + 10 compare steps


def analyse(data: dict | None = None, seed: int = 0):
    done, failed = run_file(PTX, [re.escape(KERNEL)], LaunchRequest(block=(THREADS, 1, 1), data=data or {},
                                                                    seed=seed), [load_rule_set("sm_90")], level="ptx")
    assert not failed, failed[0].error
    (analysis,) = done
    rows = {row["instruction"]: row for row in analysis.results.to_pylist()}
    text = {row["instruction"]: row["text"] for row in analysis.instructions.to_pylist()}
    return analysis, rows, text


def swapping_warps(keys: np.ndarray) -> int:
    """Warp-level executions of the swap body: per compare step, the warps with a lane that swaps."""
    keys = keys.astype(np.int64).copy()
    t = np.arange(THREADS)
    executions = 0
    size = 2
    while size <= N:
        up = (size == N) | ((t & (size // 2)) == 0)
        stride = size // 2
        while stride > 0:
            pos = 2 * t - (t & (stride - 1))
            swap = (keys[pos] > keys[pos + stride]) == up
            executions += int(swap.reshape(-1, 32).any(axis=1).sum())
            a, b = keys[pos].copy(), keys[pos + stride].copy()
            keys[pos] = np.where(swap, b, a)
            keys[pos + stride] = np.where(swap, a, b)
            stride //= 2
        size *= 2
    assert (np.diff(keys) >= 0).all()
    return executions


def test_without_data_the_key_loads_are_exact_and_the_swap_is_flagged():
    analysis, rows, text = analyse()
    key_loads = [i for i, t in text.items() if t.startswith("ld.shared") and i in rows
                 and rows[i]["executions"] == STEPS * THREADS // 32]
    assert len(key_loads) == 2                      # keys[pos], keys[pos + stride]: 55 steps x 16 warps each
    assert all(rows[i]["wavefronts"] > 0 for i in key_loads)
    swap = {u["instruction"] for u in analysis.unresolved}
    assert len(swap) == 6 and all(not u["executions"] and u["uncounted"] for u in analysis.unresolved)
    assert all("branch at PTX line" in u["reason"] and "loaded from memory" in u["reason"]
               for u in analysis.unresolved)
    # the copy-in stores and the copy-out loads follow from the thread index: counted
    assert sum(1 for i in rows if i not in swap and rows[i]["executions"] == THREADS // 32) == 8


@pytest.mark.parametrize("seed", [0, 3])
def test_with_data_every_swap_is_counted_as_the_sort_runs(seed):
    analysis, rows, text = analyse({"0": f"random:u32:{N}:0:4096", "1": f"random:u32:{N}"}, seed=seed)
    assert not analysis.unresolved
    keys = np.random.default_rng(seed).integers(0, 4096, N).astype(np.uint32)
    expected = swapping_warps(keys)
    swaps = Counter(rows[i]["executions"] for i in rows if rows[i]["executions"] not in (THREADS // 32,
                                                                                          STEPS * THREADS // 32))
    assert swaps == Counter({expected: 6})
    assert any("sample input random:uint32:1024:0:4096 with --seed" in v for v in analysis.launch["data"].values())


SPIN = Path(__file__).resolve().parent / "fixtures" / "emulate" / "spin_lock.ptx"


def test_ctas_sharing_a_global_counter_run_in_launch_order(tmp_path):
    np.save(tmp_path / "lock.npy", np.zeros(1, np.int32))
    np.save(tmp_path / "counter.npy", np.zeros(33, np.int32))
    launch = LaunchRequest(block=(32, 1, 1), grid=(6, 1, 1),
                           data={"0": str(tmp_path / "lock.npy"), "1": str(tmp_path / "counter.npy")})
    done, failed = run_file(SPIN, None, launch, [load_rule_set("sm_90")], level="ptx")
    assert not failed and not done[0].unresolved
    # every CTA is emulated (what it loads depends on the CTAs before it), in order: CTA k counts k
    assert done[0].launch["analysed_ctas"] == 6 and done[0].launch["scale"] == 1
    acc = done[0].accesses[32]
    stores = [(int(cta), int(row[0])) for cta, row, kind in zip(acc.cta, acc.address, acc.kind)
              if kind == 1 and (row >= 0).sum() == 1]
    assert stores == [(k, 4 * k) for k in range(6)]


def test_without_data_the_counter_index_is_unresolved():
    done, failed = run_file(SPIN, None, LaunchRequest(block=(32, 1, 1), grid=(6, 1, 1)), [load_rule_set("sm_90")],
                            level="ptx")
    assert not failed
    (entry,) = done[0].unresolved
    assert "_Z9spin_lockPiS__param_1" in entry["reason"] and "--data" in entry["reason"]


def test_shared_memory_holds_what_was_stored_without_any_data():
    from test_emulate_support import kernel_module, run
    # each thread stores its mirrored index, and after the barrier reads its neighbour's as an address
    result = run(kernel_module("""
        mov.u32 %r1, %tid.x;
        shl.b32 %r2, %r1, 2;
        sub.s32 %r3, 31, %r1;
        st.shared.u32 [%r2], %r3;
        bar.sync 0;
        xor.b32 %r4, %r2, 4;
        ld.shared.u32 %r5, [%r4];
        shl.b32 %r6, %r5, 3;
        st.shared.u32 [%r6+256], %r1;
        ret;""", shared=".shared .align 4 .b8 buf[1024];\n"))
    assert not result.unresolved
    lanes = np.arange(32)
    assert result.accesses.address[-1].tolist() == (256 + 8 * (31 - (lanes ^ 1))).tolist()


GUARDED_STORE = """
    ld.param.u64 %rd1, [p0];
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    st.shared.u32 [%r2], %r1;
    ld.global.u32 %r3, [%rd1];
    setp.eq.u32 %p1, %r3, 7;
    @%p1 st.shared.u32 [%r2], 100;
    ld.shared.u32 %r5, [%r2];
    shl.b32 %r6, %r5, 2;
    st.shared.u32 [%r6+512], %r1;
    ret;"""


@pytest.mark.parametrize("flag", [None, 7, 6])
def test_a_store_under_an_unknown_predicate_may_have_happened(flag):
    """``@%p st`` with %p from data nobody gave: the store is unresolved and what it may have overwritten is
    unknown (never the value before it, whichever way the emulated predicate came out); with the data the
    predicate decides."""
    from test_emulate_support import kernel_module, run
    from traceconf.emulate.data import DataBuffer
    module = kernel_module(GUARDED_STORE, params=".param .u64 p0", shared=".shared .align 4 .b8 buf[2048];\n")
    data = {} if flag is None else {"p0": DataBuffer(np.full(1, flag, np.uint32), "flag")}
    result = run(module, data=data)
    if flag is None:
        assert [u["ptx"] for u in result.unresolved] == ["@%p1 st.shared.u32 [%r2], 100",
                                                         "st.shared.u32 [%r6+512], %r1"]
        assert "p0, which has no --data" in result.unresolved[0]["reason"]
        return
    assert not result.unresolved
    stored = 100 if flag == 7 else np.arange(32)
    assert result.accesses.address[-1].tolist() == (512 + 4 * np.broadcast_to(stored, 32)).tolist()
