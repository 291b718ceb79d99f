"""Trace readers on real third-party traces (../shared/traces) and their building blocks."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import shared_path
from traceconf.accesses import INACTIVE, WarpAccesses
from traceconf.errors import InputError
from traceconf.traces import detect_format, open_trace
from traceconf.sass.opcodes import ALWAYS, IN_WINDOW, shared_op
from traceconf.traces.tokens import parse_hex, parse_int, tokenize


def read(path, **options):
    out = []
    for kt in open_trace(path, **options):
        chunks = list(kt.chunks())
        out.append((kt, WarpAccesses.concat(chunks) if chunks else None))
    return out


def test_matrixmul_shared_lines_match_the_manifest():
    path = shared_path("traces", "microgpusim-matrixmul", "kernelslist.g")
    [(kt, got)] = read(path)
    assert kt.kernel == "_Z8mult_gpuIfEvPT_S1_S1_ii" and kt.launch["trace_version"] == 4
    counts = {}
    for row in kt.instructions.to_pylist():
        counts[row["opcode"]] = counts.get(row["opcode"], 0) + row["executions"]
    assert counts == {"LDS.U.32": 1024, "LDS.U.128": 256, "STS": 64}
    assert len(got) == 1344 and np.all(got.address != INACTIVE)  # every shared line has a full mask
    assert got.address.max() < 8192  # window offsets inside -shmem = 8192
    # LDS.U.32 lines are "4 1 0x1000 4": base + 4 * lane
    lds32 = got.take(np.flatnonzero(got.bytes == 4))
    steps = np.diff(lds32.address, axis=1)
    assert np.all(steps == 4)
    lds128 = got.take(np.flatnonzero(got.bytes == 16))
    assert np.all(lds128.address == lds128.address[:, :1])  # stride 0: broadcast
    assert set(got.warp.tolist()) == set(range(32)) and set(got.cta.tolist()) == {0}
    assert np.array_equal(got.execution, np.arange(1344))


@pytest.mark.parametrize("folder, name", [
    ("microgpusim-vectoradd", "kernelslist.g"),
    ("mgpusim-simple-trace-example", "kernel-1.traceg"),
    ("mgpusim-rodinia-b+tree-h100", "kernel-1-ctx_0x5607b0e17740.traceg"),
])
def test_global_and_local_only_traces_have_no_shared_accesses(folder, name):
    """vectorAdd is global only; b+tree's 6,152 LDL/STL local lines (offsets like 0xfffbd0) are not shared."""
    [(kt, got)] = read(shared_path("traces", folder, name))
    assert got is None and kt.bad_lines == 0 and kt.instructions.num_rows == 0


def test_kernelslist_naming_a_missing_kernel_file():
    path = shared_path("traces", "mgpusim-rodinia-b+tree-h100", "kernelslist.g")
    traces = open_trace(path)
    first = next(traces)  # kernel-1 is there and reads
    assert first.launch["trace_version"] == 5 and first.launch["binary_version"] == 90
    first.drain()
    with pytest.raises(InputError) as error:
        next(traces)
    assert error.value.line == 4 and "kernel-2-ctx_0x5607b0e17740.traceg not found" in error.value.message


def test_real_traces_are_detected():
    for folder in ("microgpusim-matrixmul", "microgpusim-vectoradd", "mgpusim-simple-trace-example"):
        assert detect_format(shared_path("traces", folder)) == "accelsim"
        assert detect_format(shared_path("traces", folder, "kernelslist.g")) == "accelsim"


@pytest.mark.parametrize("opcode, kind, nbytes, matrices, space", [
    ("LDS", "ld", 4, 0, ALWAYS), ("LDS.U", "ld", 4, 0, ALWAYS), ("LDS.U.128", "ld", 16, 0, ALWAYS),
    ("LDS.U8", "ld", 1, 0, ALWAYS), ("LDS.S16", "ld", 2, 0, ALWAYS), ("LDS.64", "ld", 8, 0, ALWAYS),
    ("STS.128", "st", 16, 0, ALWAYS), ("STS.U8", "st", 1, 0, ALWAYS),
    ("ATOMS.ADD", "atom", 4, 0, ALWAYS), ("ATOMS.CAS.64", "atom", 8, 0, ALWAYS),
    ("ATOMS.ADD.F16x2.RN", "atom", 4, 0, ALWAYS),
    ("LDSM.16.M88.4", "ldmatrix", 16, 4, ALWAYS), ("LDSM.16.MT88.2", "ldmatrix", 16, 2, ALWAYS),
    ("LDSM.16.M88", "ldmatrix", 16, 1, ALWAYS), ("STSM.16.M88.4", "stmatrix", 16, 4, ALWAYS),
    ("LDGSTS.E.BYPASS.LTC128B.128", "cp_async", 16, 0, IN_WINDOW), ("LDGSTS.E.64", "cp_async", 8, 0, IN_WINDOW),
    ("LD.E.64", "ld", 8, 0, IN_WINDOW), ("ST.E.U8", "st", 1, 0, IN_WINDOW), ("ATOM.E.ADD", "atom", 4, 0, IN_WINDOW),
])
def test_shared_opcodes(opcode, kind, nbytes, matrices, space):
    op = shared_op(opcode)
    assert (op.kind, op.bytes, op.matrices, op.space) == (kind, nbytes, matrices, space)


@pytest.mark.parametrize("opcode", ["LDG.E", "STG.E.128", "LDL", "STL.64", "ATOMG.E.ADD", "IMAD", "BAR.SYNC",
                                    "UTMALDG.2D", "LDC"])
def test_other_opcodes_are_not_shared(opcode):
    assert shared_op(opcode) is None


def test_token_number_parsers():
    t = tokenize(b"0x1f 1F  0x0000000000000200\t-12 +7 0 0xffffffffffffffff zz 0x\n")
    value, bad = parse_hex(t, np.array([0, 1, 2, 6, 7, 8]))
    assert value[:3].tolist() == [31, 31, 512] and value[3] == -1  # 2**64 - 1 wraps like the unsigned value
    assert bad.tolist() == [False, False, False, False, True, True]
    value, bad = parse_int(t, np.array([3, 4, 5, 7]))
    assert value[:3].tolist() == [-12, 7, 0] and bad.tolist() == [False, False, False, True]
    assert t.count.tolist() == [9]


def test_nvbit_malformed_and_orphan_lines(tmp_path):
    path = tmp_path / "log.txt"
    window = 0x7F3A5C000000  # mem_trace prints generic addresses inside the shared window
    addresses = " ".join(f"0x{window + 4 * lane:016x}" for lane in range(32))
    path.write_text(f"MEMTRACE: CTX 0x1 - grid_launch_id 0 - CTA 0,0,0 - warp 0 - LDS - {addresses}\n")
    with pytest.raises(InputError, match="before any kernel launch"):
        read(path)
    launch = ("MEMTRACE: CTX 0x1 - LAUNCH - Kernel pc 0x2 - Kernel name k(float*) - grid launch id 0 - grid size "
              "1,1,1 - block size 32,1,1 - nregs 8 - shmem 128 - cuda stream id 0\n")
    short = " ".join(addresses.split()[:31])
    path.write_text(launch + f"MEMTRACE: CTX 0x1 - grid_launch_id 0 - CTA 0,0,0 - warp 0 - LDS - {addresses}\n"
                    + f"MEMTRACE: CTX 0x1 - grid_launch_id 0 - CTA 0,0,0 - warp 1 - STS - {short}\n")
    with pytest.raises(InputError) as error:
        read(path)
    assert error.value.line == 3 and "32 hexadecimal addresses" in error.value.message
    [(kt, got)] = read(path, skip_bad=True)
    assert kt.kernel == "k(float*)" and kt.bad_lines == 1 and len(got) == 1
    assert got.address[0].tolist() == [4 * lane for lane in range(32)]


def test_a_trace_recorded_on_another_architecture_says_which_rules_counted_it():
    """``-binary version = 61`` counted with the default sm_90 says so and how to use the recording GPU's rules
    (issue 24, item 12); with ``-d sm_61`` nothing is said."""
    from traceconf.pipeline import run_trace
    from traceconf.rules import load_rule_sets

    folder = shared_path("traces", "microgpusim-matrixmul")
    [default], _ = run_trace(folder / "kernel-1.traceg", None, load_rule_sets([], "sm_90"))
    assert ("recorded on sm_61 (the trace's -binary version = 61); counted with sm_90's rules: -d sm_61 counts "
            "with the recording GPU's") in default.notes
    [recording], _ = run_trace(folder / "kernel-1.traceg", None, load_rule_sets(["sm_61"]))
    assert not [note for note in recording.notes if "recorded on" in note]
