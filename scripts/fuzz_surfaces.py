"""Fuzz the surfaces beyond PTX and text traces (issue 25): every input ends in a result or an InputError.

Surfaces (``--surface NAME``, repeatable; default: all, drawn in turn):

* ``sass-text``, ``sass-json``: SASS listings (nvdisasm / cuobjdump text, ``nvdisasm -json`` with structural
  edits: keys removed, values of another type) read by traceconf.sass.listing.parse_text;
* ``elf``: the ``cuobjdump -elf`` text of a cubin (traceconf.sass.binary.elf_facts), and half the inputs a
  cubin or fatbin with a table field at an edge value or mutated bytes, through load_binary: our container
  checks (traceconf.sass.containers) refuse many; of the rest, the first TOOL_BUDGET distinct ones go on to
  the NVIDIA tools and the listing parser, the others stop after the checks (counted apart);
* ``tracez``: structural edits of a small .tracez (header fields, counts, offsets, sizes, frames swapped for
  zstd bombs that claim or stream past the sub-chunk cap), read by run_trace;
* ``launch-files``, ``rule-files``: TOML with values swapped for other types (lists of lists, tables, huge
  integers, strings) and text edits, read by read_launch_file / load_rule_set;
* ``data``: ``--data`` specs (edge integers, dtypes) and .npy / raw files of random dtypes, shapes and byte
  orders, read by traceconf.emulate.data.load_source; differential oracle: an array saved little- and
  big-endian loads as the same numbers;
* ``compare-ncu``, ``compare-gpgpusim``: Nsight Compute Source-page and counters CSVs (read_source_csv,
  read_counters_csv) and GPGPU-Sim stats files (read_gpgpusim_stats);
* ``outputs``: output targets (FIFOs, links to /dev/null, folders, paths under files, /proc, inside an
  input folder) through check_output / check_results_folder; oracle: nothing that is not a regular file is
  ever replaced, and a target the checks accept can be written.  One input in SIGNAL_EVERY forks a CLI run
  writing ``-o`` from this warm process and sends it SIGINT, SIGTERM or SIGHUP; oracle: exit 0/1/2/3/130 or
  death by that signal, no traceback, the target as it was or whole;
* ``resume``: a results folder of a tiny suite, damaged (partitions truncated or bit-flipped, the manifest
  edited or of another shape); oracle: no unit whose partitions changed is skipped, and (every
  RESUME_RUN_EVERY-th input, resumed in full) the resumed dataset equals the clean one;
* ``options``: --workers, --scheduler, --block/--grid, --param, --dynamic-smem, --memory-limit values;
* ``cli``: ``traceconf analyze`` in this process (traceconf.cli.main) with one to three options at edge values;
  oracle: exit 0/1/2/3, no traceback or internal error, a refusal names the option or the file;
* ``overlap``: one input vs the same input twice (the folder, its kernelslist.g, a link): the plans agree.

    python scripts/fuzz_surfaces.py --seconds 60
    python scripts/fuzz_surfaces.py --surface data --count 100000 --report data.json
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import stat
import struct
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_common import (EDGE_INTEGERS, ROOT, Findings, arguments, mutate_bytes, mutate_text, run_loop,  # noqa: E402
                         swap_toml_value)

SASS = ROOT / "tests" / "data" / "sass"
FIXTURES = ROOT / "tests" / "fixtures"
#: Values a TOML or JSON field is swapped for: other types, other shapes, the edges of every width.
ODD_VALUES = [[["ld"]], [[1, 2]], {}, {"a": 1}, "", "x" * 300, True, 1.5, float("inf"), -1, 0, 2**31, 2**63 - 1,
              -2**63, [], [1, "a"], [None], "0x20"]
def _json_edit(value, rng: random.Random, depth: int = 0):
    """A copy of a JSON document with one node removed, retyped or replaced."""
    if isinstance(value, dict) and value and (depth < 6 or rng.random() < 0.5):
        key = rng.choice(list(value))
        copy = dict(value)
        choice = rng.random()
        if choice < 0.25:
            del copy[key]
        elif choice < 0.5:
            copy[key] = rng.choice(ODD_VALUES)
        else:
            copy[key] = _json_edit(value[key], rng, depth + 1)
        return copy
    if isinstance(value, list) and value:
        index = rng.randrange(len(value))
        copy = list(value)
        choice = rng.random()
        if choice < 0.2:
            del copy[index]
        elif choice < 0.35:
            copy[index] = rng.choice(ODD_VALUES)
        elif choice < 0.45:
            copy.insert(index, copy[index])
        else:
            copy[index] = _json_edit(value[index], rng, depth + 1)
        return copy
    return rng.choice(ODD_VALUES)


#: Options of ``traceconf analyze`` and values beyond the edge integers (None: a flag without a value).
CLI_OPTIONS = [("--block", ["0x20", "32x8", "32,8,1,1", "", "-32", "1024,2"]),
               ("--grid", ["0", "65536,65536,65536", "1,,1", "2147483648"]),
               ("--param", ["0=1", "2=70000", "n=1", "=", "0=0x", "99=1", "0=-1", "2=1e3"]),
               ("--data", ["0=random:u8:100", "0=random:f32:1e9", "1=/dev/null", "0=/nonexistent.npy",
                           "0=random:s32:16:-5:5", "x=random"]),
               ("--dynamic-smem", ["0", "49152", "1e9", "-1", "4G"]),
               ("--ctas", ["0", "1", "-1"]), ("--max-steps", ["0", "1", "10"]),
               ("--time-limit", ["0", "-1", "nan", "inf", "1e-9"]), ("--work-limit", ["0", "1", "-5"]),
               ("--memory-limit", ["0", "1", "1K", "1e400G", "nanG", "4G", "-1M"]),
               ("--workers", ["0", "-1", "1000", "2", "x"]),
               ("--scheduler", ["", " ", "tcp://", "tcp://h:99999", "inproc://x", "::"]),
               ("--device", ["sm_90", "nosuch", "", "sm_90,sm_75", "cdna3"]),
               ("--format", ["table", "json", "csv", "html", "xml", ""]),
               ("--level", ["ptx", "sass", "x", ""]), ("--top", ["0", "-1", "1"]),
               ("--fail-on-excess", ["0", "-1", "1", "x"]), ("--seed", ["0", "-1", "x"]),
               ("--kernel", ["nosuch", "*", "[", ""]), ("--launches", ["/dev/null", "/nonexistent.toml"]),  # "": open
               ("--ptxas-option", ["-O0", "--bogus", "", "-arch=sm_1"]),
               ("--exhaustive", [None]), ("--skip-bad", [None]), ("--resume", [None]), ("--output", [None])]
#: Share of SASS text inputs that are a whole listing (the rest: the header and a window of lines).
WHOLE_LISTINGS = 0.05
#: One damaged results folder in this many is resumed in full (the rest: the skip decision only).
RESUME_RUN_EVERY = 25
#: One output case in this many is a signal sent to a run writing its output.
SIGNAL_EVERY = 100
#: Distinct mutated binaries that may reach the NVIDIA tools in one run (each costs about a second).
TOOL_BUDGET = 150


def _edit_table_field(data: bytes, rng: random.Random) -> bytes:
    """``data`` with one field of its container tables (ELF header, section or program header, fatbin header
    or entry header) set to an edge value: most are caught by our container checks."""
    out = bytearray(data)
    if out[:4] == b"\x7fELF":
        shoff, = struct.unpack_from("<Q", out, 40)
        shnum, = struct.unpack_from("<H", out, 60)
        regions = [(0, 64), (shoff, shoff + 64 * shnum), (struct.unpack_from("<Q", out, 32)[0], len(out))]
    else:
        regions = [(0, 16), (16, 16 + 80)] + [(len(out) - 816, len(out) - 736)]
    start, end = rng.choice(regions)
    end = min(end, len(out))
    if end - start < 8:
        return mutate_bytes(data, rng)
    width = rng.choice([1, 2, 4, 8])
    at = rng.randrange(start, end - width + 1)
    at -= at % width
    value = rng.choice([0, 1, 2, 3, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, len(data), len(data) + 1, 2**63,
                        2**64 - 1, struct.unpack_from("<Q", out, 40)[0]])
    out[at:at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
    return bytes(out)


class Surfaces:
    """The seeds and scratch folder of every surface; ``run(name, rng)`` -> (input bytes, suffix) and raises
    what the library raised (InputError passes; an AssertionError is an oracle's finding)."""

    def __init__(self):
        from traceconf.rules import load_rule_sets
        self.rules = load_rule_sets(["sm_90"])
        self.folder = Path(tempfile.mkdtemp(prefix="traceconf-fuzz-surfaces-"))
        self.sass_texts = [p.read_text() for p in sorted(SASS.glob("*.sass"))]
        self.sass_json = json.loads((SASS / "transpose.sm_90.json").read_text())
        self.binaries = [(p.suffix, p.read_bytes()) for p in (SASS / "matmul.sm_90.cubin",
                                                               SASS / "transpose.sm_90.fatbin")]
        self.rule_texts = [p.read_text() for p in sorted((ROOT / "traceconf" / "rules").glob("*.toml"))]
        self.launch_texts = [(FIXTURES / "cuda" / "kernels.toml").read_text()[:6000],
                             '[[launch]]\nkernel = "k"\nblock = [32, 8]\ngrid = 4\nparams = {n = 5, 1 = 7}\n'
                             'dynamic_smem = 1024\nctas = 2\nmax_steps = 100\n']
        self.ncu = [p.read_text() for p in sorted((FIXTURES / "ncu").glob("*.csv"))]
        hw = ROOT / "tests" / "data" / "hw"
        self.ncu += [p.read_text()[:20000] for p in sorted(hw.rglob("*.csv"))[:6]] if hw.is_dir() else []
        self.stats = [p.read_text() for p in sorted((FIXTURES / "gpgpusim").glob("*.txt"))]
        self.tracez = self._small_tracez()
        self.elf_text = None
        self.bombs: list[bytes] = []
        self.suite = None
        self.clean = None
        self.cache = Path(tempfile.mkdtemp(prefix="traceconf-fuzz-cache-"))   # outside the scratch folder
        self.tool_inputs: set[bytes] = set()
        self.cli_module = None              # traceconf.cli once the signal surface has warmed it
        self.once = None             # the units of the overlap surface's input, planned once
        self.counts: dict[str, int] = {}        # sub-cases of a surface, merged into the run's stages

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    # ------------------------------------------------------------------ scratch
    def scratch(self) -> Path:
        for stale in self.folder.iterdir():
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale)
            else:
                stale.unlink()
        return self.folder

    def _small_tracez(self) -> bytes:
        sys.path.insert(0, str(ROOT / "tests"))
        from test_traces_samples import samples
        return samples.tracez(samples.traceg(version=5, kernel_id=3), subchunk_insts=8)

    # ------------------------------------------------------------------ surfaces
    def sass_text(self, rng):
        """A listing, most often cut to its first lines and a window of about 40 more (a listing of 20-50 KB
        takes 3 ms to parse, a window a tenth of that), then edited."""
        from traceconf.sass.listing import parse_text
        text = rng.choice(self.sass_texts)
        if rng.random() > WHOLE_LISTINGS:
            lines = text.split("\n")
            begin = rng.randrange(12, max(13, len(lines)))
            text = "\n".join(lines[:12] + lines[begin:begin + rng.randint(2, 80)]) + "\n"
        text = mutate_text(text, rng, self.sass_texts)
        parse_text(text, "<fuzz>.sass")
        return text.encode("utf-8", "surrogatepass"), ".sass"

    def sass_json_listing(self, rng):
        from traceconf.sass.listing import parse_text
        document = self.sass_json
        for _ in range(rng.randint(1, 3)):
            document = _json_edit(document, rng)
        text = json.dumps(document)
        if rng.random() < 0.2:
            text = mutate_text(text, rng, [text])
        parse_text(text, "<fuzz>.json")
        return text.encode("utf-8", "surrogatepass"), ".json"

    def elf(self, rng):
        """Half the inputs: the ``cuobjdump -elf`` text of a cubin, edited.  The other half: a cubin or fatbin
        with a table field set to an edge value or its bytes mutated, read by load_binary.  Our own container
        checks reject many of them in microseconds; of those that pass, the first ``TOOL_BUDGET`` distinct
        binaries go on to the NVIDIA tools (a second each) and the listing parser, the rest stop after the
        checks (counted apart in the summary)."""
        from traceconf import tools
        from traceconf.errors import InputError
        from traceconf.sass.binary import elf_facts, load_binary
        from traceconf.sass.containers import check_container
        if self.elf_text is None:
            os.environ["TRACECONF_CACHE"] = str(self.cache)
            self.elf_text = ""
            if tools.locate("cuobjdump"):
                from traceconf.sass.toolchain import disassemble
                self.elf_text = disassemble(self.binaries[0][1], "seed")[1]
        if rng.random() < 0.5 and tools.locate("cuobjdump"):
            suffix, data = rng.choice(self.binaries)
            data = _edit_table_field(data, rng) if rng.random() < 0.6 else mutate_bytes(data, rng)
            path = self.scratch() / f"k{suffix}"
            try:
                check_container(data, str(path))
            except InputError:
                self.count("binary: refused by the container checks")
            else:
                if data not in self.tool_inputs and len(self.tool_inputs) >= TOOL_BUDGET:
                    self.count("binary: passed the container checks (tool budget spent)")
                    return data, suffix
                self.tool_inputs.add(data)
                self.count("binary: through the tools")
            path.write_bytes(data)
            load_binary(path)
            return data, suffix
        text = mutate_text(self.elf_text or "", rng, [self.elf_text or ""])
        elf_facts(text)
        return text.encode("utf-8", "surrogatepass"), ".elf"

    def tracez_structure(self, rng):
        from traceconf.pipeline import run_trace
        data = bytearray(self.tracez)
        header_end = data.index(b"\0")
        index_offset = struct.unpack_from("<Q", data, len(data) - 8)[0]
        choice = rng.random()
        if choice < 0.3:     # a u32 or u64 field of the binary part set to an edge value
            at = rng.randrange(header_end + 1, len(data) - 4)
            value = rng.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x10000000, len(data), index_offset])
            struct.pack_into("<I", data, at - (at - header_end - 1) % 4, value & 0xFFFFFFFF)
        elif choice < 0.45:  # the index offset
            struct.pack_into("<Q", data, len(data) - 8, rng.choice([0, 1, index_offset - 4, index_offset + 4,
                                                                   len(data), 2**63, 2**64 - 1]))
        elif choice < 0.65:  # a zstd bomb in place of the first sub-chunk
            data = self._bomb(data, header_end, rng)
        elif choice < 0.8:   # the header text
            header = data[:header_end].decode("utf-8", "replace")
            text = mutate_text(header, rng, [header])
            data = bytearray(text.encode("utf-8", "surrogatepass").replace(b"\0", b"")) + data[header_end:]
        else:
            data = bytearray(mutate_bytes(bytes(data), rng))
        path = self.scratch() / "kernel-1.tracez"
        path.write_bytes(bytes(data))
        _, failures = run_trace(path, None, self.rules, memory_limit=1 << 30)
        _raise_internal(failures)
        return bytes(data), ".tracez"

    def _bomb(self, data: bytearray, header_end: int, rng) -> bytearray:
        """``data`` with its first sub-chunk replaced by a bomb: a frame claiming more than the cap, or a
        stream without a stated size that expands to newlines or to one endless line."""
        if not self.bombs:
            import zstandard
            small = zstandard.ZstdCompressor(level=1, write_content_size=False)
            lines = small.compress(b"\n" * (1 << 16))
            window, blocks = lines[5:6], lines[6:]     # descriptor 0: a window byte, then the blocks
            assert lines[4] == 0, "a frame without content size, checksum or dictionary id"
            self.bombs = [b"\x28\xb5\x2f\xfd\xc0" + window + struct.pack("<Q", size) + blocks
                          for size in (257 << 20, 1 << 40, 2**64 - 3)]
            streamed = zstandard.ZstdCompressor(level=3, write_content_size=False)
            self.bombs += [streamed.compress(b"\n" * (300 << 20)), streamed.compress(b"A" * (80 << 20)),
                           streamed.compress(b"0008 ffffffff 0 STS 2 R2 R5 4 1 0x0 4\n" * (1 << 20))]
        frame = rng.choice(self.bombs)
        dict_size = struct.unpack_from("<I", data, header_end + 1)[0]
        first = header_end + 1 + 8 + dict_size + 8        # after warp 0's u32 inst_count, u32 num_subchunks
        size = struct.unpack_from("<I", data, first)[0]
        return data[:first] + bytearray(struct.pack("<I", len(frame))) + frame + data[first + 4 + size:]

    def launch_file(self, rng):
        from traceconf.launches import read_launch_file
        text = rng.choice(self.launch_texts)
        text = swap_toml_value(text, rng) if rng.random() < 0.6 else mutate_text(text, rng, self.launch_texts)
        path = self.scratch() / "launches.toml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        read_launch_file(path)
        return text.encode("utf-8", "surrogatepass"), ".toml"

    def rule_file(self, rng):
        from traceconf.rules import load_rule_set
        text = rng.choice(self.rule_texts)
        text = swap_toml_value(text, rng) if rng.random() < 0.6 else mutate_text(text, rng, self.rule_texts)
        path = self.scratch() / "rules.toml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        load_rule_set(path)             # rule files are cached by content: an edited file is read again
        return text.encode("utf-8", "surrogatepass"), ".toml"

    def data(self, rng):
        import numpy as np

        from traceconf.emulate.data import ALLOWED, load_source
        folder = self.scratch()
        choice = rng.random()
        if choice < 0.4:
            dtype = rng.choice(list(ALLOWED) + ["u8", "s32", "f16", "b64", "complex64", "bool", "x", ""])
            parts = ["random", dtype, rng.choice(EDGE_INTEGERS + ["16", "1000"])]
            if rng.random() < 0.5:
                parts += [rng.choice(EDGE_INTEGERS + ["0", "1e9", "nan", "-inf"]), rng.choice(EDGE_INTEGERS)]
            spec = ":".join(parts[:rng.randint(1, len(parts))] if rng.random() < 0.1 else parts)
            try:        # the memory limit of a run: a larger buffer is refused before it is allocated
                load_source(spec, rng.randrange(2**32), "--data 0", max_bytes=64 << 20)
            except MemoryError:
                raise AssertionError(f"MemoryError escaped for {spec}")
            return spec.encode(), ".spec"
        dtype = np.dtype(rng.choice(["<i4", ">i4", "<u2", ">u2", ">f8", "<f4", ">i8", "|u1", ">c8", "<M8[s]",
                                     "|b1", "|O", "<U3", "|V4"]))
        count = rng.choice([0, 1, 7, 64])
        if dtype.kind in "iu":
            values = np.arange(count, dtype=np.int64) * rng.choice([1, -1, 12345])
            array = values.astype(dtype.newbyteorder("<")).astype(dtype) if dtype.kind == "u" else values.astype(dtype)
        elif dtype.kind == "O":
            array = np.array([1, "a"][:max(count, 1) % 3], dtype=object)
        else:
            array = np.zeros(count, dtype=dtype)
        if rng.random() < 0.3 and array.size == 64:
            array = array.reshape(8, 8) if rng.random() < 0.5 else np.asfortranarray(array.reshape(8, 8))
        path = folder / "d.npy"
        if dtype.kind == "O":
            np.save(path, array, allow_pickle=True)
        else:
            np.save(path, array)
        raw = path.read_bytes()
        if rng.random() < 0.3:
            raw = mutate_bytes(raw, rng)
            path.write_bytes(raw)
            load_source(str(path), 0, "--data 0", max_bytes=64 << 20)
            return raw, ".npy"
        loaded = load_source(str(path), 0, "--data 0", max_bytes=64 << 20)
        # oracle: the numbers loaded are the numbers saved, whatever the byte order (C order, flattened)
        expected = np.ascontiguousarray(array).reshape(-1)
        assert loaded.array.dtype.byteorder in "<=|", f"{dtype}: loaded as {loaded.array.dtype}"
        assert np.array_equal(loaded.array, expected), f"{dtype}: the numbers changed on loading"
        if dtype.byteorder == ">" and dtype.itemsize > 1:
            assert "big-endian" in loaded.description, loaded.description
        return raw, ".npy"

    def compare_ncu(self, rng):
        from traceconf.analyses.ncu import read_counters_csv, read_source_csv
        from traceconf.analyses.ncu_launches import read_launch_csv
        text = mutate_text(rng.choice(self.ncu), rng, self.ncu)
        path = self.scratch() / "ncu.csv"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        rng.choice([read_source_csv, read_source_csv, read_counters_csv, read_launch_csv])(path)
        return text.encode("utf-8", "surrogatepass"), path.suffix

    def compare_gpgpusim(self, rng):
        from traceconf.traces.gpgpusim import read_gpgpusim_stats
        text = mutate_text(rng.choice(self.stats), rng, self.stats)
        path = self.scratch() / "gpgpu_inst_stats.txt"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        read_gpgpusim_stats(path)
        return text.encode("utf-8", "surrogatepass"), path.suffix

    def outputs(self, rng):
        """An output target of every kind (FIFO, link to /dev/null, folder, path under a file, /proc, inside
        an input folder); every ``SIGNAL_EVERY``-th input instead interrupts a run writing ``-o`` (see
        :meth:`signal`)."""
        self.outputs_run = getattr(self, "outputs_run", 0) + 1
        if self.outputs_run % SIGNAL_EVERY == 0:
            return self.signal(rng)
        from traceconf.errors import InputError
        from traceconf.outputs import check_results_folder, write_text
        from traceconf.report.writers import check_output
        folder = self.scratch()
        (folder / "file").write_text("x")
        (folder / "input").mkdir()
        (folder / "input" / "part.parquet").write_bytes(b"PAR1")
        os.mkfifo(folder / "fifo.json")
        (folder / "null.csv").symlink_to("/dev/null")
        (folder / "dir.json").mkdir()
        (folder / "old.json").write_text("old")
        names = ["fifo.json", "null.csv", "dir.json", "old.json", "new.json", "file/x.json", "missing/x.csv",
                 "input/r.parquet", "input/r.json", "input", "input/sub", "file/out", "out", "/proc/x.json",
                 "/proc/out", "/proc/self/x.csv", "new.parquet", "x.txt", ".", "..", "file"]
        name = rng.choice(names)
        target = Path(name) if name.startswith("/") else folder / name
        before = {p: (p.lstat().st_mode, p.lstat().st_ino) for p in folder.rglob("*")}
        inputs = [folder / "input"]
        try:
            if not target.suffix or target.is_dir():
                check_results_folder(target, inputs)
                target.mkdir(parents=True, exist_ok=True)
            else:
                check_output(target, inputs)
                write_text(target, "{}", inputs)
                assert target.read_text() == "{}"
        except InputError:
            pass
        for path, (mode, inode) in before.items():   # oracle: nothing but a regular file is ever replaced
            if not stat.S_ISREG(mode):
                now = path.lstat()
                assert (now.st_mode, now.st_ino) == (mode, inode), f"{path} was replaced"
        assert (folder / "input" / "part.parquet").read_bytes() == b"PAR1"
        return name.encode(), ".path"

    def signal(self, rng):
        """A CLI run (``analyze PTX -o TARGET``) forked from this warm process and sent SIGINT, SIGTERM or
        SIGHUP after a random delay.  Oracle: it ends with 0/1/2/3 or 130 (or dies of the signal it was sent),
        prints no traceback, and TARGET is either as it was or a whole new result, never half-written."""
        import signal
        import time
        folder = self.scratch()
        target = folder / rng.choice(["out.json", "out.csv"])
        old = rng.choice([None, "old"])
        if old is not None:
            target.write_text(old)
        errors = folder / "stderr"
        errors.write_text("")                   # the child may be stopped before it writes a byte
        argv = ["traceconf", "analyze", str(FIXTURES / "ptx" / "smem_kernels.ptx"), "--block", "128",
                "--param", "2=4096", "--grid", rng.choice(["1", "2", "8"]), "-o", str(target)]
        how = rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
        delay = rng.choice([0.0, 0.001, 0.01, 0.05, 0.2]) * rng.random()
        if self.cli_module is None:         # warm: one whole run here, so that a child imports nothing
            import contextlib

            import traceconf.cli
            self.cli_module = traceconf.cli
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                    contextlib.suppress(SystemExit):
                sys.argv = argv[:-1] + [str(folder / "warm.json")]
                self.cli_module.main()
        pid = os.fork()
        if pid == 0:                                      # the child: one CLI run, nothing of the parent's after
            code = 99
            try:
                descriptor = os.open(errors, os.O_WRONLY)
                os.dup2(descriptor, 2)
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
                sys.argv = argv
                self.cli_module.main()
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 98
            finally:
                os._exit(code)
        time.sleep(delay)
        os.kill(pid, how)
        deadline = time.monotonic() + 60
        while (waited := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise AssertionError(f"{argv} did not end within 60 s of {how.name}")
            time.sleep(0.002)
        status = waited[1]
        self.count(f"signal: {how.name} " + ("ended" if os.WIFEXITED(status) else "killed"))
        text = errors.read_text(errors="replace")
        assert "Traceback" not in text, f"{how.name}: a traceback\n{text[-2000:]}"
        if os.WIFEXITED(status):
            assert os.WEXITSTATUS(status) in (0, 1, 2, 3, 130), f"{how.name}: exit {os.WEXITSTATUS(status)}: {text}"
        else:
            assert os.WTERMSIG(status) == how, f"died of signal {os.WTERMSIG(status)} after {how.name}"
        if target.exists():
            body = target.read_text()
            if body != old:      # a new result: whole (JSON that parses, CSV whose last line ends)
                assert body.endswith("\n") or target.suffix == ".json", f"{target.name} half-written"
                if target.suffix == ".json":
                    json.loads(body)
        else:
            assert old is None, f"{how.name} removed the old {target.name}"
        return f"{how.name} after {delay:.4f} s: {' '.join(argv[1:])}".encode(), ".txt"

    def resume(self, rng):
        """A results folder of a tiny suite, damaged (partitions truncated, bit-flipped or with runs of one
        byte, the manifest edited or of another shape).  Every input: which units --resume would skip;
        oracle: no unit whose partition bytes changed is skipped.  Every ``RESUME_RUN_EVERY``-th input also
        resumes the run; oracle: the resumed dataset is the clean one, row for row."""
        from traceconf.distributed import run_many
        from traceconf.distributed.dataset import MANIFEST, Dataset, read_dataset
        from traceconf.distributed.units import plan
        from traceconf.emulate.launch import LaunchRequest
        if self.suite is None:
            sys.path.insert(0, str(ROOT / "tests"))
            from test_distributed import make_suite
            self.suite = make_suite(Path(tempfile.mkdtemp(prefix="traceconf-fuzz-suite-")), apps=1, ctas=3)
            clean = self.folder.parent / f"{self.folder.name}-clean"
            run_many([self.suite], None, LaunchRequest(), self.rules, output=clean)
            self.clean = read_dataset(clean).sort_by("kernel")
            self.clean_folder = clean
            self.clean_files = {p.relative_to(clean): p.read_bytes() for p in clean.rglob("*") if p.is_file()}
            self.clean_manifest = json.loads((clean / MANIFEST).read_text())
            self.units = plan([self.suite])[0]
        out = self.scratch() / "results"
        for relative, data in self.clean_files.items():
            (out / relative).parent.mkdir(parents=True, exist_ok=True)
            (out / relative).write_bytes(data)
        damaged = []
        for _ in range(rng.randint(1, 3)):
            files = sorted(out.rglob("*.parquet")) + [out / MANIFEST]
            path = rng.choice(files)
            if path.name == MANIFEST and rng.random() < 0.7:
                try:
                    document = _json_edit(json.loads(path.read_text()), rng)
                except ValueError:          # damaged by an earlier edit of this input
                    continue
                path.write_text(json.dumps(document))
            else:
                path.write_bytes(mutate_bytes(path.read_bytes(), rng))
            damaged.append(path.name)
        changed = {str(relative) for relative, data in self.clean_files.items()
                   if not (out / relative).is_file() or (out / relative).read_bytes() != data}
        dataset = Dataset(out, [rules.name for rules in self.rules], resume=True)
        clean_units = {u["key"]: u for u in self.clean_manifest["units"]}
        for unit in self.units:
            if dataset.written(unit):       # oracle: a unit is skipped only with every partition unchanged
                partitions = clean_units[unit.key]["partitions"]
                assert not changed & set(partitions), f"--resume skips {unit.key} over {changed & set(partitions)}"
        self.resumes = getattr(self, "resumes", 0) + 1
        if self.resumes % RESUME_RUN_EVERY == 0:
            self.count("resume: run resumed and compared")
            run_many([self.suite], None, LaunchRequest(), self.rules, output=out, resume=True)
            resumed = read_dataset(out).sort_by("kernel")
            assert resumed.equals(self.clean), \
                f"the resumed dataset differs from the clean one ({resumed.num_rows} rows, {damaged})"
        return ",".join(damaged).encode(), ".txt"

    def options(self, rng):
        from traceconf.cluster import check_scheduler_address, fit_workers
        from traceconf.commands.analyze import parse_bytes, parse_dims, parse_params
        from traceconf.emulate.launch import Launch, resolve_params
        text = rng.choice(EDGE_INTEGERS + ["", " ", "0x20", "32x8", "0x20x8", "1,2,3,4", "x", "1e3", "-0", "٣",
                                           "tcp://h:1", "tcp://:1", "inproc://x", "ws://[::1]:8786", "::",
                                           "tcp://h:99999", "tls://h:1", "4G", "0.5K", "1e400G", "nanG"])
        text = mutate_text(text, rng, EDGE_INTEGERS) if rng.random() < 0.3 else text
        which = rng.randrange(6)
        if which == 0:
            check_scheduler_address(text)
        elif which == 1:
            parse_dims(text, "--block")
        elif which == 2:
            params = parse_params([f"0={text}"])
            kernel = {"kernel": "k", "params": [{"name": "k_param_0", "type": rng.choice(["u16", "s32", "b64", "f32"]),
                                                 "bytes": rng.choice([1, 2, 4, 8])}]}
            resolve_params(Launch(params=params), kernel)
        elif which == 3:
            parse_bytes(text, "--memory-limit")
        else:
            requested = rng.choice([1, 2, 7, 1000, 10**9])
            units = rng.choice([0, 1, 2, 100])
            workers, _ = fit_workers(requested, units, rng.choice([0, 1 << 20, 1 << 30, 1 << 40]))
            assert 1 <= workers <= max(1, min(requested, units)), (requested, units, workers)
        return text.encode("utf-8", "surrogatepass"), ".txt"

    def cli(self, rng):
        """``traceconf analyze`` run in this process the way the console script runs it (traceconf.cli.main),
        on a small PTX file with one to three options set to edge values.  Oracle: exit 0/1/2/3, never a
        traceback or an internal error, and a refusal names the option or the file."""
        import contextlib

        import traceconf.cli
        if getattr(self, "cli_command", None) is None:    # the click command built once (typer builds it per call)
            import typer.main
            self.cli_command = typer.main.get_command(traceconf.cli.build_app())
        argv = ["traceconf", "analyze", str(FIXTURES / "emulate" / "transpose.ptx"), "--block", "32,8",
                "--kernel", "transpose_padded"]
        for _ in range(rng.randint(1, 3)):
            option, values = rng.choice(CLI_OPTIONS)
            value = rng.choice(values + EDGE_INTEGERS) if values != [None] else None
            # a path value is not edited: a blank --launches path is an open finding (issue 25 report)
            edit = rng.random() < 0.2 and option != "--launches"
            argv += [option] if value is None else [option, mutate_text(value, rng, EDGE_INTEGERS) if edit else value]
        if "--output" in argv or "--resume" in argv:
            # "--output" drawn above is the wish for an output, given here its value in the scratch folder (left
            # bare, it took the next option as a folder name: a folder "--output" in the current directory)
            argv = [arg for arg in argv if arg != "--output"]
            argv += ["--output", str(self.scratch() / rng.choice(["out.json", "out.csv", "results"]))]
        out, err = io.StringIO(), io.StringIO()
        code = 0
        sys.argv = argv
        # main() runs the module's app: ours for this run only (a test after this one imports the real one)
        built = vars(traceconf.cli).get("app")
        traceconf.cli.app = lambda: self.cli_command.main(args=sys.argv[1:], prog_name="traceconf")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                traceconf.cli.main()
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 98
            finally:
                if built is None:
                    del traceconf.cli.app
                else:
                    traceconf.cli.app = built
        text = f"{' '.join(argv[1:])}\n{err.getvalue()}"
        self.count(f"cli: exit {code}")
        assert "Traceback" not in err.getvalue() and "internal error" not in text, text[-1500:]
        assert code in (0, 1, 2, 3), f"exit {code}: {text[-1500:]}"
        if code == 2:      # the option, or a file named on the command line (the input, a value read as a path)
            lines = err.getvalue().strip().split("\n")     # progress notes may come before the refusal
            usage = lines[0].startswith("Usage:")    # click's own refusal: a box naming the option or argument
            assert (any("--" in line or any(line.startswith((f"{word}:", f"{word!r}:")) for word in argv[2:])
                        for line in lines)
                    or usage and any(word in err.getvalue() for word in ("'--", "argument", "option"))), \
                f"a refusal naming neither option nor file: {text[-500:]}"
        return " ".join(argv[1:]).encode(), ".txt"

    def overlap(self, rng):
        from traceconf.distributed.units import plan
        from traceconf.inputs import distinct_units
        if self.suite is None:
            self.resume(rng)
        app = self.suite / "app0"
        link = self.folder.parent / f"{self.folder.name}-link"
        if not link.exists():
            link.symlink_to(app)
        spellings = [app, app / "kernelslist.g", link, link / "kernelslist.g", Path(str(app) + "/."),
                     self.suite / "app0" / ".." / "app0"]
        if self.once is None:
            self.once = distinct_units(plan([app])[0])[0]
        once = self.once
        chosen = [rng.choice(spellings) for _ in range(rng.randint(2, 4))]
        units, notes = distinct_units(plan(chosen)[0])
        assert [u.path for u in units] == [u.path for u in once] or \
            sorted(os.path.realpath(u.path) for u in units) == sorted(os.path.realpath(u.path) for u in once), \
            f"{chosen}: {len(units)} units, one input has {len(once)}"
        assert notes, f"{chosen}: no note"
        return "\n".join(map(str, chosen)).encode(), ".txt"


def _raise_internal(failures) -> None:
    """A per-kernel failure that is internal (a bug the pipeline caught) is a finding: raise its cause; an
    input's failure is raised as the InputError it is (its message is checked like any other)."""
    for failure in failures:
        if failure.internal and failure.error.__cause__ is not None:
            raise failure.error.__cause__
    if failures:
        raise failures[0].error


SURFACES = {"sass-text": Surfaces.sass_text, "sass-json": Surfaces.sass_json_listing, "elf": Surfaces.elf,
            "tracez": Surfaces.tracez_structure, "launch-files": Surfaces.launch_file,
            "rule-files": Surfaces.rule_file, "data": Surfaces.data, "compare-ncu": Surfaces.compare_ncu,
            "compare-gpgpusim": Surfaces.compare_gpgpusim,
            "outputs": Surfaces.outputs, "resume": Surfaces.resume, "options": Surfaces.options,
            "cli": Surfaces.cli,
            "overlap": Surfaces.overlap}


def make_one(names: list[str] | None = None, crashes: Path | None = None):
    """The function that runs one input: ``one(rng, findings)``, the surfaces drawn in turn."""
    from traceconf.errors import InputError

    surfaces = Surfaces()
    chosen = names or list(SURFACES)
    turn = [0]

    def one(rng: random.Random, findings: Findings) -> None:
        name = chosen[turn[0] % len(chosen)]
        turn[0] += 1
        findings.inputs += 1
        findings.count_stage(name)
        surfaces.counts = findings.stages       # sub-cases land in the run's summary
        data, suffix = b"", ".bin"
        try:
            data, suffix = SURFACES[name](surfaces, rng)
            findings.passed += 1
        except InputError as error:
            findings.input_error(error, data, crashes, suffix)
        except Exception as error:      # a finding: anything but InputError (an oracle's AssertionError too)
            findings.count_stage(f"failed: {name}")
            findings.record(error, data or repr(error).encode(), crashes, suffix)

    one.surfaces = surfaces
    return one


def main() -> None:
    import argparse
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--surface", action="append", choices=list(SURFACES))
    known, rest = extra.parse_known_args()
    sys.argv = [sys.argv[0]] + rest
    args = arguments(__doc__.splitlines()[0])
    one = make_one(known.surface, args.crashes)
    summary = run_loop(one, args, Findings(), random.Random(args.seed))
    sys.exit(1 if summary["distinct_failures"] else 0)


if __name__ == "__main__":
    main()
