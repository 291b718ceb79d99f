"""Emulation of kernels compiled by nvcc (tests/fixtures/emulate/*.cu -> .ptx, sm_90) and of the shared corpus.

Addresses are checked against what the CUDA source says.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import FIXTURES, shared_path
from test_emulate_support import active, lanes_of, parse_path, run
from traceconf.schemas import KIND_CODES

LANE = np.arange(32)
EMULATE = FIXTURES / "emulate"


def module(name: str):
    return parse_path(EMULATE / f"{name}.ptx")


@pytest.mark.parametrize("kernel, row", [("transpose_unpadded", 32), ("transpose_padded", 33)])
def test_transpose_tile_addresses(kernel, row):
    ptx = module("transpose")
    result = run(ptx, kernel, block=(32, 8, 1), grid=(32, 32, 1), params={2: 1024, 3: 1024})
    assert result.scale == 32 * 32 and not result.unresolved
    accesses = result.accesses
    stores = accesses.address[accesses.kind == KIND_CODES["st"]]
    loads = accesses.address[accesses.kind == KIND_CODES["ld"]]
    assert stores.shape == loads.shape == (4 * 8, 32)       # 4 unrolled rows x 8 warps each
    ty = accesses.warp[accesses.kind == KIND_CODES["ld"]]
    j = np.repeat(np.arange(4) * 8, 8)
    # tile[threadIdx.y + j][threadIdx.x] and tile[threadIdx.x][threadIdx.y + j]
    np.testing.assert_array_equal(stores, 4 * ((ty + j)[:, None] * row + LANE))
    np.testing.assert_array_equal(loads, 4 * (LANE * row + (ty + j)[:, None]))


def test_matmul_tiles_and_loop_count():
    ptx = module("matmul")
    result = run(ptx, "matmul16", block=(16, 16, 1), grid=(4, 4, 1), params={3: 64})
    assert result.scale == 16
    accesses = result.accesses
    tiles = 64 // 16
    loads = accesses.address[accesses.kind == KIND_CODES["ld"]]
    assert len(loads) == tiles * 16 * 2 * 8                   # k loop unrolled: As and Bs per k, 8 warps
    offsets = {v["name"][-2:]: v["offset"] for v in result.shared_layout}
    warp = accesses.warp[accesses.kind == KIND_CODES["ld"]][:, None]
    ty, tx = warp * 2 + LANE // 16, LANE % 16
    a_rows = (loads[:, :1] - offsets["As"]) // 4 - ty[:, :1] * 16      # k of As[ty][k]
    b_rows = (loads[:, :1] - offsets["Bs"]) // 4 // 16                 # k of Bs[k][tx]
    is_a = loads[:, 0] < offsets["Bs"]
    np.testing.assert_array_equal(loads[is_a], offsets["As"] + 4 * (ty * 16 + a_rows)[is_a])
    np.testing.assert_array_equal(loads[~is_a], offsets["Bs"] + 4 * (b_rows * 16 + tx)[~is_a])
    assert is_a.sum() == (~is_a).sum()


def test_reductions_diverge_and_reconverge():
    ptx = module("reduce")
    interleaved = run(ptx, "reduce_interleaved", block=(256, 1, 1), grid=(10, 1, 1), dynamic_smem=1024)
    assert interleaved.scale == 10 and not interleaved.notes
    # s = 1..128: all 8 warps take part while 2s <= 32, then 4, 2, 1 warps; 3 accesses each, plus 2
    assert len(interleaved.accesses) == 8 + 3 * (8 * 5 + 4 + 2 + 1) + 1
    sequential = run(ptx, "reduce_sequential", block=(256, 1, 1), dynamic_smem=1024)
    assert len(sequential.accesses) == 8 + 3 * (4 + 2 + 1 + 1 + 1 + 1 + 1 + 1) + 1
    too_small = run(ptx, "reduce_sequential", block=(256, 1, 1))
    assert any("--dynamic-smem" in note for note in too_small.notes)


def test_data_dependent_atomic_is_unresolved_rest_analysed():
    ptx = module("reduce")
    result = run(ptx, "data_dependent", block=(256, 1, 1), grid=(8, 1, 1))
    assert [u["ptx"].split()[0] for u in result.unresolved] == ["atom.shared.add.u32"]
    assert len(result.accesses) == 16 and result.scale == 8


def test_cta_dependent_kernel_runs_every_cta():
    ptx = module("reduce")
    result = run(ptx, "cta_dependent", block=(64, 1, 1), grid=(8, 1, 1))
    assert result.scale == 1 and len(result.accesses) == 8 * 2 * 2
    stores = result.accesses.address[result.accesses.kind == KIND_CODES["st"]]
    ctas = result.accesses.cta[result.accesses.kind == KIND_CODES["st"]]
    warps = result.accesses.warp[result.accesses.kind == KIND_CODES["st"]]
    np.testing.assert_array_equal(stores, 4 * ((ctas % 4)[:, None] * 64 + warps[:, None] * 32 + LANE))


def test_shared_memory_inside_called_functions():
    ptx = module("generic")
    result = run(ptx, "generic_shared", params={1: 33})
    store = lanes_of(result, "st.shared.u32", ptx)
    load = lanes_of(result, "ld.shared.u32 \t%r5", ptx)
    assert store[0].tolist() == (4 * 33 * LANE).tolist()
    assert load[0].tolist() == (4 * ((LANE * 33) % 1056)).tolist()


def test_generic_store_through_cvta_shared():
    ptx = module("generic")
    result = run(ptx, "generic_select", block=(64, 1, 1), params={1: 1, 2: 3})
    generic = lanes_of(result, "st.u32", ptx)
    tid = np.arange(64).reshape(2, 32)
    assert generic.tolist() == (4 * ((tid * 3) % 1024)).tolist()
    to_global = run(ptx, "generic_select", block=(64, 1, 1), params={1: 0, 2: 3})
    assert len(lanes_of(to_global, "st.u32", ptx)) == 0


def test_warp_shuffle_feeds_a_shared_index():
    ptx = module("generic")
    result = run(ptx, "shuffle_index")
    store = lanes_of(result, "st.shared.u32", ptx)
    base = result.shared_layout[0]["offset"]
    assert store[0].tolist() == (base + 4 * (LANE ^ 1)).tolist()


def test_ldmatrix_stmatrix_and_cp_async():
    ptx = module("tensor")
    result = run(ptx, "ldmatrix_tile", block=(128, 1, 1))
    accesses = result.accesses
    copies = accesses.address[accesses.kind == KIND_CODES["cp_async"]]
    assert (accesses.bytes[accesses.kind == KIND_CODES["cp_async"]] == 16).all()
    assert sorted(copies.reshape(-1).tolist()) == list(range(0, 8192, 16))
    ldm = accesses.kind == KIND_CODES["ldmatrix"]
    rows = accesses.address[ldm]
    warp = accesses.warp[ldm][:, None]
    expected = 2 * ((warp * 16 + (LANE & 15)) * 64 + (LANE >> 4) * 8)
    np.testing.assert_array_equal(rows, expected)
    assert (accesses.matrices[ldm] == 4).all() and (accesses.bytes[ldm] == 16).all()
    stm = accesses.address[accesses.kind == KIND_CODES["stmatrix"]]
    assert active(stm).sum(axis=1).tolist() == [16] * 4        # .x2: row addresses from lanes 0-15


#: file -> [(kernel name substring, launch)], first match wins; the launches follow each sample's host code.
CORPUS_LAUNCHES = {
    "transposeNew.ptx": [("", dict(block=(16, 16, 1), grid=(4, 4, 1), params={2: 64, 3: 64, 4: 1}))],
    "scan_naive_kernel.ptx": [("", dict(block=(256, 1, 1), dynamic_smem=2 * 512 * 4, params={2: 256}))],
    "scan_workefficient_kernel.ptx": [("", dict(block=(256, 1, 1), dynamic_smem=2 * 512 * 4, params={2: 512}))],
    "scan_best_kernel.ptx": [("", dict(block=(256, 1, 1), dynamic_smem=2 * 544 * 4, params={2: 512}))],
    "histogram256_SM10.ptx": [("histogram256Kernel", dict(block=(192, 1, 1), params={2: 4096})),
                              ("", dict(block=(256, 1, 1)))],
    "matrixMul_kernel.ptx": [("", dict(block=(16, 16, 1), grid=(2, 2, 1), params={3: 32, 4: 32}))],
    "needle_kernel.ptx": [("", dict(block=(16, 1, 1), params={3: 33, 4: 10, 5: 1, 6: 2}))],
    "fastWalshTransform.ptx": [("fwtBatch1", dict(block=(256, 1, 1), dynamic_smem=1024 * 4, params={2: 10})),
                               ("fwtBatch2", dict(block=(256, 1, 1), params={2: 1024})),
                               ("", dict(block=(256, 1, 1), params={2: 1024}))],
    "histogram_sliced.ptx": [("", dict(block=(128, 1, 1), max_steps=200_000))],
    "ptr-declaration.ptx": [("", dict(block=(16, 16, 1), params={3: 0, 4: 1024, 5: 32, 6: 32}))],
    "reduction_kernel.ptx": [("", dict(block=(128, 1, 1), dynamic_smem=128 * 8, params={2: 1024}))],
}
DEFAULT_CORPUS_LAUNCH = dict(block=(32, 1, 1), dynamic_smem=1024)


def _corpus_files():
    from conftest import SHARED
    corpus = SHARED / "corpus"
    return sorted(p.name for p in corpus.glob("*.ptx")) if corpus.exists() else []


def _launch_for(name: str, kernel: str) -> dict:
    for part, launch in CORPUS_LAUNCHES.get(name, []):
        if part in kernel:
            return dict(launch)
    return dict(DEFAULT_CORPUS_LAUNCH)


@pytest.mark.parametrize("name", _corpus_files() or ["(corpus absent)"])
def test_corpus_kernels_with_shared_memory_emulate(name):
    path = shared_path("corpus", name)
    ptx = parse_path(path)
    kernels = ptx.kernel_names()
    if name == "reduction_kernel.ptx":
        kernels = kernels[:7]                                  # reduce0..reduce6 for int
    uses_shared = [r for r in ptx.instructions.to_pylist() if r["state_space"] == "shared"]
    found = 0
    for kernel in kernels:
        result = run(ptx, kernel, **_launch_for(name, kernel))
        assert result.scale is not None
        found += len(result.accesses) + len(result.unresolved)
    assert (found > 0) == bool(uses_shared)
