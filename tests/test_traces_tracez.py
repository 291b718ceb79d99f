"""Accel-Sim 2.0 .tracez (per-warp zstd sub-chunks): read back, streamed, corrupt files located.

The samples are written by scripts/make_sample_traces.py's ``tracez``, which lays a generated .traceg out
as accel-sim-framework's post-traces-processing does (tracez_format.h); no third-party trace is used.
"""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest

from test_traces_samples import assert_same, read_all, samples
from traceconf.errors import InputError
from traceconf.traces import detect_format
from traceconf.traces.tracez import TracezFile, is_tracez


def text_options(name: str) -> dict:
    return samples.TRACEZ_VARIANTS[name][0]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("tracez")
    samples.write_samples(out)
    return out


@pytest.mark.parametrize("name", sorted(samples.TRACEZ_VARIANTS))
def test_tracez_reads_back_what_the_traceg_holds(folder, tmp_path, name):
    path = folder / f"{name}.tracez"
    assert detect_format(path) == "accelsim" and is_tracez(path)
    [(kt, got)] = read_all(path)
    assert_same(got, samples.expected_accesses())
    text = tmp_path / "same.traceg"
    text.write_text(samples.traceg(**text_options(name)))
    [(kt_text, _)] = read_all(text)
    assert not is_tracez(text)
    assert kt.kernel == kt_text.kernel == samples.KERNEL
    assert {k: v for k, v in kt.launch.items() if k != "file"} == {k: v for k, v in kt_text.launch.items() if k != "file"}
    assert kt.instructions.equals(kt_text.instructions)


def test_dictionary_and_subchunks_as_written(folder):
    with TracezFile(folder / "accelsim-v6-values.tracez") as file:
        assert file.subchunk_insts == 5
        ctas = list(file.ctas())
        assert [c["tb"] for c in ctas] == [(0, 0, 0), (1, 0, 0)] and ctas[1]["cluster_id"] == (1, 0, 0)
        insts, _, counts = ctas[0]["warps"][0]
        assert insts == 17 and counts == (5, 5, 5, 2)
    with TracezFile(folder / "accelsim-v5-lineinfo.tracez") as file:
        assert file.subchunk_insts == 0
        assert [len(w[2]) for c in file.ctas() for w in c["warps"]] == [1, 1, 1, 1]


def test_dictionary_trained_when_there_are_enough_lines(tmp_path):
    """A realistic kernel (many warps) gets a trained zstd dictionary, as the tracer's writer does."""
    text = samples.traceg(version=5)
    body = text[text.index("#BEGIN_TB"):]
    many = text[:text.index("#BEGIN_TB")] + "".join(
        body.replace("thread block = 0,0,0", f"thread block = {2 * i},0,0").replace(
            "thread block = 1,0,0", f"thread block = {2 * i + 1},0,0") for i in range(200))
    many = many.replace("-grid dim = (2,1,1)", "-grid dim = (400,1,1)")
    path = tmp_path / "kernel-1.tracez"
    path.write_bytes(samples.tracez(many, subchunk_insts=7))
    dict_size = struct.unpack_from("<I", path.read_bytes(), path.read_bytes().index(b"\0") + 1)[0]
    assert dict_size > 0
    [(kt, got)] = read_all(path)
    assert len(got) == 200 * len(samples.expected_accesses())
    assert sorted(set(got.cta.tolist())) == list(range(400))


def test_kernelslist_of_tracez_and_traceg(folder, tmp_path):
    (tmp_path / "kernel-1.tracez").write_bytes((folder / "accelsim-v6-values.tracez").read_bytes())
    (tmp_path / "kernel-2.traceg").write_text(samples.traceg(version=5, kernel_id=2))
    (tmp_path / "kernelslist.g").write_text("MemcpyHtoD,0x1000,16\nkernel-1.tracez\nkernel-2.traceg\n")
    launches = read_all(tmp_path)
    assert [kt.kernel for kt, _ in launches] == [samples.KERNEL, samples.KERNEL + "#2"]
    for _, got in launches:
        assert_same(got, samples.expected_accesses())


def test_blocks_are_bounded_and_whole_lines(folder):
    with TracezFile(folder / "accelsim-v6-values.tracez", block_bytes=200) as file:
        blocks = list(file.blocks())
    assert len(blocks) > 5
    assert all(text.endswith(b"\n") for text, _ in blocks)
    # one sub-chunk (5 lines) at most past the bound
    assert max(len(text) for text, _ in blocks) < 200 + 5 * 120 + 200
    firsts = [first for _, first in blocks]
    counts = [text.count(b"\n") for text, _ in blocks]
    assert all(b == a + n for a, b, n in zip(firsts, firsts[1:], counts))


def _rewrite_line(old: str, new: str) -> bytes:
    """A .tracez of the sample whose first instruction line ``old`` is replaced by ``new``."""
    text = samples.traceg(version=5)
    assert old in text
    return samples.tracez(text.replace(old, new, 1), subchunk_insts=4, dictionary=False)


def test_malformed_line_is_located_in_the_equivalent_traceg(tmp_path):
    path = tmp_path / "bad.tracez"
    path.write_bytes(_rewrite_line("0030 ffffffff 1 R4 LDS.U.32 1 R2 4 1 0x0 128",
                                   "0030 ffffffff 1 R4 LDS.U.32 1 R2 4 7 0x0 128"))
    with pytest.raises(InputError) as error:
        read_all(path)
    with TracezFile(path) as file:
        text = b"".join(t for t, _ in file.blocks()).decode()
    where = next(i for i, line in enumerate(text.split("\n")) if "LDS.U.32 1 R2 4 7" in line)
    assert error.value.line == file.header_text.count("\n") + where + 1
    assert "address mode" in error.value.message and error.value.file == str(path)
    [(kt, got)] = read_all(path, skip_bad=True)
    assert kt.bad_lines == 1


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-3], "index offset"),
    (lambda b: b[:len(b) // 2] + b[len(b) // 2 + 40:], "byte"),
    (lambda b: b[:-8] + struct.pack("<Q", 3), "index offset"),
])
def test_corrupt_files_are_reported_not_crashed(folder, tmp_path, damage, message):
    path = tmp_path / "kernel-1.tracez"
    path.write_bytes(damage((folder / "accelsim-v5-lineinfo.tracez").read_bytes()))
    with pytest.raises(InputError) as error:
        read_all(path)
    assert error.value.file == str(path) and message in str(error.value)


def test_corrupt_frame(folder, tmp_path):
    data = bytearray((folder / "accelsim-v5-lineinfo.tracez").read_bytes())
    with TracezFile(folder / "accelsim-v5-lineinfo.tracez") as file:
        _, offset, _ = next(file.ctas())["warps"][0]
    data[offset + 8 + 4 + 6:offset + 8 + 4 + 12] = b"\xff" * 6  # inside the first zstd frame
    path = tmp_path / "kernel-1.tracez"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="corrupt .tracez at byte"):
        read_all(path)


def test_cli_analyze_tracez_and_corrupt_one_line(folder, tmp_path):
    run = subprocess.run([sys.executable, "-m", "traceconf", "analyze", str(folder / "accelsim-v6-values.tracez"),
                          "--format", "csv"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "LDS.U.32" in run.stdout
    bad = tmp_path / "kernel-1.tracez"
    bad.write_bytes((folder / "accelsim-v6-values.tracez").read_bytes()[:-5])
    run = subprocess.run([sys.executable, "-m", "traceconf", "analyze", str(bad)], capture_output=True, text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[0].startswith(f"{bad}: corrupt .tracez")


def test_empty_warp_and_cta_order_as_indexed(tmp_path):
    """A warp without instruction lines has no sub-chunk (num_subchunks 0), as the writer leaves it."""
    text = samples.traceg(version=5).replace("-block dim = (64,1,1)", "-block dim = (96,1,1)")
    text = text.replace("\n#END_TB", "\nwarp = 2\ninsts = 0\n\n#END_TB")
    path = tmp_path / "kernel-1.tracez"
    path.write_bytes(samples.tracez(text, subchunk_insts=3))
    with TracezFile(path) as file:
        warps = [w for c in file.ctas() for w in c["warps"]]
    assert len(warps) == 6 and warps[2][0] == 0 and warps[2][2] == ()
    [(kt, got)] = read_all(path)
    assert kt.launch["warps_per_cta"] == 3
    assert_same(got, samples.expected_accesses())


@pytest.mark.parametrize("content_size", [True, False])
def test_decompression_bomb_sub_chunk_is_refused_in_bounded_memory(tmp_path, monkeypatch, content_size):
    """A few KiB of zstd that expands to 8 MiB (x thousands), with or without its size in the frame header, is
    refused at the per-sub-chunk limit (here lowered to 1 MiB) rather than decompressed whole."""
    import tracemalloc

    import zstandard

    from traceconf.traces import tracez
    monkeypatch.setattr(tracez, "MAX_SUBCHUNK_BYTES", 1 << 20)
    good = tmp_path / "good.tracez"
    good.write_bytes(samples.tracez(samples.traceg(version=5), subchunk_insts=0, dictionary=False))
    with TracezFile(good) as file:
        insts, offset, counts = next(file.ctas())["warps"][0]
    data = good.read_bytes()
    (size,) = struct.unpack("<I", data[offset + 8:offset + 12])
    bomb = zstandard.ZstdCompressor(level=19, write_content_size=content_size).compress(b"A" * (8 << 20))
    assert len(bomb) * 1000 < 8 << 20
    # the first warp's only sub-chunk becomes the bomb; the index moves with it (later warps' offsets are off,
    # but the first warp is read, and refused, first)
    body = data[:offset + 8] + struct.pack("<I", len(bomb)) + bomb + data[offset + 12 + size:-8]
    index_offset = struct.unpack("<Q", data[-8:])[0] + len(bomb) - size
    path = tmp_path / "kernel-1.tracez"
    path.write_bytes(body + struct.pack("<Q", index_offset))
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=r"sub-chunk 0 expands to .* past the limit of 1 MiB per sub-chunk"):
            read_all(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak                      # never the 8 MiB text
