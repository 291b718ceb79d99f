"""The .traceg reader's shortcuts give exactly what the full parse gives.

Shortcuts under test: parsing each distinct line text once, the RE2 screen that
only counts lines which cannot touch shared memory, the eight-characters-at-a-time hexadecimal parser, the hashed
grouping of opcodes, and the per-row shared-window decision for mode-1 lines.
"""

from __future__ import annotations

import importlib.util
import random
import sys

import numpy as np
import pytest

from conftest import REPO, shared_path
from traceconf.accesses import WarpAccesses
from traceconf.errors import InputError
from traceconf.traces import accelsim, open_trace
from traceconf.traces.tokens import _MIX, group_rows, line_array, lines_matching, parse_hex, tokenize

_spec = importlib.util.spec_from_file_location("make_sample_traces", REPO / "scripts" / "make_sample_traces.py")
samples = importlib.util.module_from_spec(_spec)
sys.modules["make_sample_traces"] = samples
_spec.loader.exec_module(samples)

FIELDS = ("cta", "warp", "execution", "instruction", "kind", "bytes", "matrices", "address")


def test_parse_hex_matches_python_int():
    rng = random.Random(5)
    digits = "0123456789abcdefABCDEF"
    tokens = ["0", "f", "0x0", "0X1A", "ffffffff", "0xffffffffffffffff", "ffffffffffffffff", "8000000000000000",
              "0x", "x", "g", "0xg", "1ffffffffffffffff", "12:4", "-1", "`", "@", "0x0000000000000000001"]
    tokens += ["".join(rng.choice(digits) for _ in range(rng.randint(1, 18))) for _ in range(2000)]
    tokens += ["0x" + "".join(rng.choice(digits) for _ in range(rng.randint(1, 17))) for _ in range(500)]
    tokens += ["".join(chr(rng.randint(33, 126)) for _ in range(rng.randint(1, 12))) for _ in range(1000)]
    t = tokenize(" ".join(tokens).encode() + b"\n")
    value, bad = parse_hex(t, np.arange(len(tokens)))
    for token, got, invalid in zip(tokens, value.tolist(), bad.tolist()):
        text = token[2:] if len(token) > 2 and token[:2] in ("0x", "0X") else token
        valid = 1 <= len(text) <= 16 and all(c in digits for c in text)
        assert invalid == (not valid), token
        if valid:
            assert got == np.int64(np.uint64(int(text, 16))), token


def test_group_rows_separates_rows_whose_hashes_collide():
    keys = np.array([[1, 2], [3, 4], [1, 2], [5, 6]], dtype=np.uint64)
    first, group = group_rows(keys)
    assert (keys[first][group] == keys).all() and len(first) == 3
    a, b = 10, 1 << 63
    colliding = np.array([[a, b], [a + 1, (b - int(_MIX)) % (1 << 64)], [a, b]], dtype=np.uint64)
    with np.errstate(over="ignore"):
        assert len(set((colliding[:, 0] * _MIX + colliding[:, 1]).tolist())) == 1  # one hash, two rows
    first, group = group_rows(colliding)
    assert group.tolist() == [0, 1, 0] and (colliding[first][group] == colliding).all()


@pytest.mark.parametrize("line, plain", [
    ("0008 ffffffff 1 R1 MOV 0 0", True),
    ("0070 ffffffff 2 R2 R3 XMAD.MRG 3 R3 R17 R255 0", True),
    ("0020 ffffffff 0 ULDC 0 0 0", True),
    ("0ab0 ffffffff 0 STL.64 2 R1 R6 8 1 0xfffbe8 0 0", True),
    ("0010 ffffffff 1 R1 LDG.E 1 R2 4 1 0x7f00 4", True),
    ("0010 ffffffff 1 R1 .X 0", True),
    ("0010 ffffffff 1 R1 LDS.U.32 1 R5 4 1 0x1000 4", False),  # shared: decoded in full
    ("0010 ffffffff 1 R1 LDS 1 R5 4 1 0x1000 4", False),
    ("0010 ffffffff 0 ST.E 2 R1 R2 4 1 0x0 4", False),
    ("0010 ffffffff 0 RED.E.ADD 2 R1 R2 4 1 0x0 4", False),
    ("0010 ffffffff 0 LDGSTS.E 2 R1 R2 4 1 0x0 4", False),
    ("0ad0 ffffffff 0", False),                                # truncated: the full parse reports it
    ("0ad0 ffffffff 1 R1", False),
    ("0ad0 ffffffff 01 R1 MOV 0", False),                      # unusual dest count: full parse
    ("0ad0 ffffffff 12 R1 MOV 0", False),
    ("0x10 ffffffff 0 MOV 0", False),                          # not an instruction line
    ("warp = 3", False),
])
def test_screen_counts_only_lines_that_cannot_touch_shared_memory(line, plain):
    block = (line + "\n").encode()
    assert lines_matching(line_array(block, np.array([0])), accelsim.plain_line_pattern(0))[0] == plain


def _read(path, skip_bad):
    try:
        out = []
        for kt in open_trace(path, skip_bad=skip_bad):
            chunks = list(kt.chunks())
            out.append((kt.kernel, kt.bad_lines, kt.instructions.to_pylist(),
                        [getattr(WarpAccesses.concat(chunks), f).tolist() for f in FIELDS] if chunks else None))
        return out
    except InputError as error:
        return str(error)


def _mutants(text: str, count: int, seed: int) -> list[str]:
    """Copies of a trace with a few lines damaged, to reach every error path."""
    rng = random.Random(seed)
    junk = ["", "x", "0x12", "+1", "01", "65", "LDS", "LD", "ST.E", "lds", "zz", "ffffffff", "0", "9", "warp = 3"]
    out = []
    for _ in range(count):
        lines = text.split("\n")
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(len(lines))
            tokens = lines[k].split(" ")
            if tokens and rng.random() < 0.5:
                tokens[rng.randrange(len(tokens))] = rng.choice(junk)
            else:
                tokens = tokens[:rng.randrange(len(tokens) + 1)]
            lines[k] = " ".join(tokens)
        out.append("\n".join(lines))
    return out


def _generic_trace(seed: int) -> str:
    """Generic and shared accesses with addresses around every bound of the shared window, all three modes."""
    rng = random.Random(seed)
    base, window = samples.SHMEM_BASE, 1 << 24
    anchors = [base, base + window, 0, window, 1 << 62, (1 << 64) - 8, base - 64]
    ops = ["LDS", "LDS.U.128", "LD.E", "ST.E.64", "ATOM.E.ADD", "LDGSTS.E.128", "ATOMS.CAS.64", "LDSM.16.M88.4"]
    lines = ["-kernel name = k", "-grid dim = (1,1,1)", "-block dim = (32,1,1)", f"-shmem base_addr = 0x{base:x}",
             "-accelsim tracer version = 4", "", "#BEGIN_TB", "thread block = 0,0,0", "warp = 0", "insts = 600"]
    for k in range(600):
        mask = rng.choice([0xFFFFFFFF, 0, 1, 0x3, 0x80000001, rng.randrange(1 << 32)])
        address = lambda: (rng.choice(anchors) + rng.randint(-40, 40)) % (1 << 64)  # noqa: E731
        mode = rng.choice([0, 1, 1, 2])
        if mode == 1:
            stride = rng.choice([0, 0, 1, 4, -4, 1 << 20, -(1 << 23), 1 << 41])
            addresses = f"0x{address():x} {stride}"
        elif mode == 2:
            addresses = " ".join([f"0x{address():x}"] + [str(rng.choice([4, -8, 1 << 24]))
                                                        for _ in range(max(bin(mask).count("1") - 1, 0))])
        else:
            addresses = " ".join(f"0x{address():x}" for _ in range(bin(mask).count("1")))
        lines.append(f"{8 * k:04x} {mask:08x} 1 R1 {rng.choice(ops)} 1 R2 4 {mode} {addresses}")
    return "\n".join(lines) + "\n#END_TB\n"


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fast")
    paths = samples.write_samples(folder)
    texts = [p.read_text() for p in sorted(paths) if p.suffix == ".traceg"]
    texts.append(shared_path("traces", "microgpusim-matrixmul", "kernel-1.traceg").read_text()[:30000])
    texts += [_generic_trace(seed) for seed in range(8)]
    out = []
    for i, text in enumerate(texts + [m for j, t in enumerate(texts) for m in _mutants(t, 6, j)]):
        path = folder / f"t{i}.traceg"
        path.write_text(text)
        out.append(path)
    return out


def test_shortcuts_give_what_the_full_parse_gives(traces, monkeypatch):
    fast = {(p, skip): _read(p, skip) for p in traces for skip in (False, True)}
    # the full parse: every line parsed on its own, none screened out, every mode-1 row decided lane by lane
    monkeypatch.setattr(accelsim, "distinct_lines", lambda lines: (lines, np.arange(len(lines))))
    monkeypatch.setattr(accelsim, "plain_line_pattern", lambda prefix: "^$.")
    monkeypatch.setattr(accelsim, "_SAFE_STRIDE", 0)
    for (path, skip), got in fast.items():
        assert got == _read(path, skip), path
