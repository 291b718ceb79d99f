"""The worked examples of the four founding documents (../shared/seeds), as engine results.

000: blog "GPU bank conflicts" (CUDA guide 2.2 struct examples, 16 banks, half-warps)
001: Hadwiger, KAUST CS 380 lecture 19 (strides, char/short, structs, broadcast, G80 vs Fermi, 2 per thread)
002: fsword73, HD 5870 LDS bank conflicts (STRIDE*64/32-2, uint4 reduction, padding)
003: Habr "Understanding shared-memory bank conflicts" (1.x vs 2.0, s[tid*s] odd/even on Fermi)
"""

from __future__ import annotations

from math import gcd

import pytest

from test_engine import costs
from traceconf.rules import load_rule_set

G80, FERMI, HOPPER, HD5870 = (load_rule_set(n) for n in ("sm_1x", "sm_2x", "sm_90", "terascale"))
TID = range(32)


def ways(rules, kind, nbytes, addresses):
    """max_ways and excess wavefronts of one warp-level access."""
    ((wavefronts, ideal, max_ways),) = costs(rules, [(kind, nbytes, 0, list(addresses))])
    return max_ways, wavefronts - ideal


def words(index):
    """Byte addresses of 32-bit elements ``shared[index(tid)]``."""
    return [4 * index(t) for t in TID]


# --- 001: linear addressing on G80 (16 banks, half-warps) --------------------------------------------------

@pytest.mark.parametrize("stride", [1, 3, 5, 7, 9, 15, 17, 31])
def test_g80_odd_strides_are_conflict_free(stride):
    assert ways(G80, "ld", 4, words(lambda t: stride * t)) == (1, 0)


@pytest.mark.parametrize("stride, expected", [(2, 2), (4, 4), (8, 8), (16, 16)])
def test_g80_even_strides_conflict(stride, expected):
    # 2 half-warps, each `expected`-way: excess = 2 * (expected - 1)
    assert ways(G80, "ld", 4, words(lambda t: stride * t)) == (expected, 2 * (expected - 1))


def test_g80_random_permutation_is_conflict_free():
    permutation = [5, 12, 0, 9, 3, 14, 7, 1, 11, 6, 15, 2, 8, 13, 4, 10]
    assert ways(G80, "ld", 4, words(lambda t: permutation[t % 16] + 16 * (t // 16))) == (1, 0)


# --- 001/003: data types (8/16-bit) ------------------------------------------------------------------------

@pytest.mark.parametrize("nbytes, g80_ways", [(1, 4), (2, 2)])
def test_char_and_short_arrays_conflict_on_g80_not_on_fermi(nbytes, g80_ways):
    element = [nbytes * t for t in TID]                  # shared[BaseIndex + tid] of char / short
    assert ways(G80, "ld", nbytes, element)[0] == g80_ways
    assert ways(FERMI, "ld", nbytes, element) == (1, 0)  # "not true on Fermi, because of multi-cast"
    assert ways(HOPPER, "ld", nbytes, element) == (1, 0)


@pytest.mark.parametrize("nbytes, padding", [(1, 4), (2, 2)])
def test_padded_char_and_short_arrays_are_conflict_free_on_g80(nbytes, padding):
    assert ways(G80, "ld", nbytes, [nbytes * padding * t for t in TID]) == (1, 0)   # shmem8[threadIdx.x*4]


# --- 000/001: structs ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("member", [0, 1, 2])
def test_struct_of_three_floats_is_conflict_free_on_g80(member):
    assert ways(G80, "ld", 4, words(lambda t: 3 * t + member)) == (1, 0)


@pytest.mark.parametrize("member", [0, 1])
def test_struct_of_two_words_is_two_way_on_g80(member):
    assert ways(G80, "ld", 4, words(lambda t: 2 * t + member)) == (2, 2)


def test_struct_of_two_words_read_as_one_64_bit_access_is_split_on_g80():
    # §F.3.3.4: a 64-bit read compiles into two 32-bit requests with a stride of two -> 2-way each.
    assert ways(G80, "ld", 8, [8 * t for t in TID]) == (2, 4)
    assert ways(FERMI, "ld", 8, [8 * t for t in TID]) == (1, 0)   # 2.x: half-warps, conflict-free


# --- 001: broadcast and G80 vs Fermi -------------------------------------------------------------------------

@pytest.mark.parametrize("rules", [G80, FERMI, HOPPER], ids=lambda r: r.name)
def test_every_thread_reads_one_element(rules):
    assert ways(rules, "ld", 4, [0] * 32) == (1, 0)


def test_g80_broadcasts_one_word_per_step_fermi_any_number():
    two_words = [4 * (t % 16 // 8) for t in TID]          # lanes 0-7 read word 0, lanes 8-15 word 1 (per half)
    assert ways(G80, "ld", 4, two_words) == (2, 2)
    assert ways(FERMI, "ld", 4, two_words) == (1, 0)


def test_g80_half_warps_are_independent_fermi_sees_the_whole_warp():
    halves_in_different_rows = [4 * (t % 16) + 128 * (t // 16) for t in TID]
    assert ways(G80, "ld", 4, halves_in_different_rows) == (1, 0)
    assert ways(FERMI, "ld", 4, halves_in_different_rows) == (2, 1)


# --- 001: two elements per thread ---------------------------------------------------------------------------

@pytest.mark.parametrize("rules", [G80, FERMI, HOPPER], ids=lambda r: r.name)
def test_two_elements_per_thread_interleaved_vs_blocked(rules):
    for element in (0, 1):                                  # shared[2*tid], shared[2*tid+1]
        assert ways(rules, "st", 4, words(lambda t: 2 * t + element))[0] == 2
    for element in (0, 1):                                  # shared[tid], shared[tid + blockDim.x]
        assert ways(rules, "st", 4, words(lambda t: t + 256 * element)) == (1, 0)


# --- 003: Fermi s[tid*s] ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("stride", range(1, 33))
def test_fermi_stride_conflicts_iff_even(stride):
    max_ways, excess = ways(FERMI, "ld", 4, words(lambda t: stride * t))
    assert (excess > 0) == (stride % 2 == 0)
    assert max_ways == gcd(stride, 32)


# --- 002: HD 5870 (TeraScale), 64-lane wavefronts in 32-lane halves --------------------------------------------

@pytest.mark.parametrize("stride, article", [(2, 2), (4, 6), (8, 14)])
def test_hd5870_power_of_two_strides_match_the_article(stride, article):
    assert ways(HD5870, "ld", 4, [4 * stride * t for t in range(64)])[1] == article   # STRIDE*64/32-2


@pytest.mark.parametrize("stride, article, model", [(10, 18, 2), (12, 22, 6)])
def test_hd5870_strides_10_and_12_follow_the_bank_model_not_the_formula(stride, article, model):
    # gcd(10, 32) = 2 lanes per bank per half -> 2 x (2 - 1); gcd(12, 32) = 4 -> 2 x (4 - 1).
    excess = ways(HD5870, "ld", 4, [4 * stride * t for t in range(64)])[1]
    assert excess == model != article


@pytest.mark.parametrize("stride", [1, 3, 5, 7, 9, 11])
def test_hd5870_odd_strides_are_conflict_free(stride):
    assert ways(HD5870, "ld", 4, [4 * stride * t for t in range(64)]) == (1, 0)


def test_hd5870_uint4_reduction_and_its_5_dword_padding():
    # sdata[tid] of uint4: each 32-bit request has a 4-DWORD stride -> 6 conflicts, 4 requests.
    assert ways(HD5870, "ld", 16, [16 * t for t in range(64)]) == (4, 4 * 6)
    # packed {uint4 d; uint r;}: 5-DWORD stride, odd -> conflict-free.
    assert ways(HD5870, "ld", 16, [20 * t for t in range(64)]) == (1, 0)
