"""Kernel names: demangling and the one --kernel selector every command uses."""

import pytest

from traceconf.errors import InputError
from traceconf.names import demangle, function_name, matches, qualified_name, same_kernel, select_kernels

KERNELS = ["_Z12matmul_tiledILi16EEvPKfS1_Pfi", "_Z12matmul_tiledILi32EEvPKfS1_Pfi", "_Z16transpose_paddedPfPKfi",
           "transpose", "_ZN4cute6kernelEPf"]


@pytest.mark.parametrize("name, qualified, function", [
    ("void mult_gpu<float>(float *, float *, float *, int, int)", "mult_gpu<float>", "mult_gpu"),
    ("_Z8mult_gpuIfEvPT_S1_S1_ii", "mult_gpu<float>", "mult_gpu"),
    ("_ZN4cute6kernelEPf", "cute::kernel", "kernel"),
    ("ns::k2(int)", "ns::k2", "k2"),
    ("transpose_padded", "transpose_padded", "transpose_padded"),
    ("_ZZ18transpose_unpaddedE4tile", "transpose_unpadded::tile", "tile"),
    ("_Z3barv", "bar", "bar"),
    ("_Zbroken", "_Zbroken", "_Zbroken"),
])
def test_qualified_and_function_names(name, qualified, function):
    assert qualified_name(name) == qualified
    assert function_name(name) == function


def test_demangle_reads_like_cxxfilt_and_keeps_plain_names():
    assert demangle("_Z12matmul_tiledILi16EEvPKfS1_Pfi") == \
        "void matmul_tiled<16>(float const*, float const*, float*, int)"
    assert demangle("triton_poi_fused_0") == "triton_poi_fused_0"


def test_same_kernel_matches_nsight_spelling_and_tells_instantiations_apart():
    ncu = "void matmul_tiled<16>(const float *, const float *, float *, int)"
    assert same_kernel(ncu, KERNELS[0])
    assert not same_kernel(ncu, KERNELS[1])
    assert not same_kernel("transpose", "transpose_padded")


@pytest.mark.parametrize("pattern, chosen", [
    ("transpose", ["transpose"]),                                  # exact beats the substring of transpose_padded
    ("matmul_tiled<32>", ["_Z12matmul_tiledILi32EEvPKfS1_Pfi"]),   # demangled, no parameters
    ("matmul_tiled", KERNELS[:2]),                                 # bare function name: every instantiation
    ("padded", ["_Z16transpose_paddedPfPKfi"]),                    # part of a name
    ("cute::", ["_ZN4cute6kernelEPf"]),                             # part of the demangled name
    ("tiled<(16|32)>$", KERNELS[:2]),                              # regex over demangled names
    ("_Z16transpose_paddedPfPKfi", ["_Z16transpose_paddedPfPKfi"]),
])
def test_select_kernels_tiers(pattern, chosen):
    assert select_kernels(KERNELS, [pattern]) == chosen


def test_select_keeps_file_order_and_merges_patterns():
    assert select_kernels(KERNELS, ["transpose", "matmul_tiled<16>"]) == [KERNELS[0], "transpose"]
    assert select_kernels(KERNELS, None) == KERNELS


def test_unknown_kernel_says_did_you_mean():
    with pytest.raises(InputError, match=r"no kernel matches 'matmal_tiled'; did you mean 'matmul_tiled"):
        select_kernels(KERNELS, ["matmal_tiled"], "k.ptx")
    with pytest.raises(InputError, match=r"no kernel matches 'zz\('"):   # not a valid regex either
        select_kernels(KERNELS, ["zz("])


def test_streamed_matching_uses_the_same_forms():
    assert matches("_Z16transpose_paddedPfPKfi", ["transpose_padded"])
    assert matches("anything", None)
    assert not matches("transpose", ["matmul"])


def test_short_names_collapse_template_arguments_from_the_inside():
    from traceconf.names import short_name
    assert short_name("_Z17reduce0_SMVERSIONIiEvPT_S1_j") == "reduce0_SMVERSION<int>"
    long = ("void k<cute::tuple<cute::C<128>, cute::C<256> >, cute::Layout<cute::C<8> >, 3>(half*, int)")
    assert short_name(long, width=40) == "k<cute::tuple<…>, cute::Layout<…>, 3>"
    assert short_name(long, width=10) == "k<…>"
    assert short_name("x" * 80, width=20) == "x" * 19 + "…"


def test_spacing_of_template_arguments_does_not_matter():
    """``-k 'tmpl_copy<32,double>'`` names ``tmpl_copy<32, double>`` as c++filt spells it (issue 24, item 13)."""
    double, single = "_Z9tmpl_copyILi32EdEvPT0_S1_", "_Z9tmpl_copyILi32EfEvPT0_S1_"
    assert select_kernels([double, single], ["tmpl_copy<32,double>"]) == [double]
    assert select_kernels([double, single], ["tmpl_copy<32 ,float>( float*,float*)"]) == [single]
    assert select_kernels([double, single], ["copy<32,double"]) == [double]
