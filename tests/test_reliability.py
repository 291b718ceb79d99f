"""Issue 25: nothing lost, nothing summed twice, no raw messages (the third reliability round).

Each failure the hostile-input campaign found is a case here, run through the real CLI where the CLI is what
failed: exit status 2 (or 0 with a note), one line naming the file or option that holds the bad value.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FIXTURES

TRANSPOSE = FIXTURES / "emulate" / "transpose.ptx"
BITONIC = FIXTURES / "emulate" / "bitonic_swap.ptx"
NCU = FIXTURES / "ncu" / "transpose_cuda.csv"
STATS = FIXTURES / "gpgpusim" / "transpose_inst_stats.txt"


def _run(*args, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "traceconf", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def _one_line_error(result, *fragments: str, status: int = 2) -> str:
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[0]
    for fragment in fragments:
        assert fragment in line, result.stderr
    return line


def _replaced(source: Path, target: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text
    target.write_text(text.replace(old, new, 1))
    return target


# --- one number reader that names its source ---------------------------------------------------------

def test_bad_ncu_count_names_the_csv_and_its_line(tmp_path):
    report = _replaced(NCU, tmp_path / "r.csv", '"32,768","32,768"', '"1e400","32,768"')
    result = _run("compare-ncu", report, TRANSPOSE, "-k", "transpose_unpadded", "--block", "32,8", "--level", "ptx")
    line = _one_line_error(result, f"{report}:4:", "'1e400' is not a finite number")
    assert str(TRANSPOSE) not in line


def test_bad_gpgpusim_count_names_the_stats_file_and_its_line(tmp_path):
    stats = _replaced(STATS, tmp_path / "s.txt", "transpose.ptx 81 : 512 9216 0 512",
                      "transpose.ptx 81 : 512 9216 0 99999999999999999999999999999")
    result = _run("compare-gpgpusim", stats, TRANSPOSE, "--block", "32,8", "--grid", "2")
    _one_line_error(result, f"{stats}:2:", "smem_bk_conflicts 99999999999999999999999999999 is out of range")


@pytest.mark.parametrize("spec, message", [
    ("0=random:u32:99999999999999999999999", "COUNT 99999999999999999999999 is out of range"),
    ("0=random:u32:10:0:0x1ffffffffffffffffffff", "range [0, "),
])
def test_bad_data_spec_names_the_option(spec, message):
    result = _run("analyze", TRANSPOSE, "--block", "32,8", "--level", "ptx", "--data", spec)
    line = _one_line_error(result, message)
    assert line.startswith("--data 0: ")


def test_a_damaged_npy_header_is_a_located_error(tmp_path):
    import io

    from traceconf.emulate.data import load_source
    from traceconf.errors import InputError
    saved = io.BytesIO()
    np.save(saved, np.arange(4, dtype="<i4"))
    damaged = tmp_path / "d.npy"
    damaged.write_bytes(saved.getvalue().replace(b"(4,), }", b"(4,\n   "))
    with pytest.raises(InputError, match="not a readable .npy file") as raised:
        load_source(str(damaged), 0, "--data 0")
    assert raised.value.file == str(damaged)


@pytest.mark.parametrize("spec", ["random:f16:8:0:1e9", "random:f64:8:-1e308:1e308", "random:f32:8:0:inf"])
def test_float_sample_ranges_must_fit_the_dtype(spec):
    from traceconf.emulate.data import load_source
    from traceconf.errors import InputError
    with pytest.raises(InputError, match="is empty or does not fit"):
        load_source(spec, 0, "--data 0")


def test_a_data_buffer_past_the_memory_limit_is_refused_before_it_is_allocated():
    result = _run("analyze", TRANSPOSE, "--block", "32,8", "--level", "ptx", "-k", "transpose_unpadded",
                  "--data", "0=random:u64:4294967296", "--memory-limit", "1G")
    _one_line_error(result, "--data 0: ", "more than the memory limit of 1,073,741,824")


# --- big-endian --data ---------------------------------------------------------------------------------

def _bitonic_json(tmp_path: Path, keys: np.ndarray, name: str) -> dict:
    import json
    np.save(tmp_path / name, keys)
    result = _run("analyze", BITONIC, "--block", "512", "--level", "ptx", "--data", f"0={tmp_path / name}",
                  "--data", "1=random:u32:1024", "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_big_endian_data_means_the_same_numbers(tmp_path):
    keys = np.random.default_rng(7).permutation(1024).astype("<i4")
    little = _bitonic_json(tmp_path, keys, "little.npy")
    big = _bitonic_json(tmp_path, keys.astype(">i4"), "big.npy")

    def counts(doc):
        return [(k["totals"], k.get("instructions")) for k in doc["results"]]
    assert counts(little) == counts(big)
    assert little["results"][0]["totals"]["ld"]["wavefronts"] > 0
    described = " ".join(str(v) for k in big["results"] for v in k["launch"]["data"].values())
    assert "big-endian, converted" in described


# --- outputs: checked before any work, never over what is not a regular file -------------------------

TRACES = Path(__file__).resolve().parents[1] / "traces"


def test_output_naming_a_fifo_or_a_device_is_refused(tmp_path):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    device = tmp_path / "null.csv"
    device.symlink_to("/dev/null")
    for target in (fifo, device):
        result = _run("analyze", TRANSPOSE, "--block", "32,8", "--level", "ptx", "-o", target)
        _one_line_error(result, str(target), "not a regular file")
    assert fifo.is_fifo() and device.is_symlink() and Path("/dev/null").is_char_device()


@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_unwritable_results_folder_is_refused_before_the_analysis(tmp_path, where):
    from traceconf.outputs import check_results_folder
    (tmp_path / "file").write_text("")
    folder = tmp_path / "file" / "results" if where == "under_a_file" else Path("/proc/traceconf-results")
    with pytest.raises(Exception) as raised:
        check_results_folder(folder, [])
    assert str(folder) in str(raised.value)
    assert not Path("/proc/traceconf-results").exists()


def test_unwritable_results_folder_ends_the_cli_run_at_once(tmp_path):
    (tmp_path / "file").write_text("")
    result = _run("analyze", TRANSPOSE, "--block", "32,8", "--level", "ptx", "-o", tmp_path / "file" / "out")
    _one_line_error(result, f"{tmp_path / 'file' / 'out'}: cannot make the results folder")
    assert "kernel" not in result.stderr and result.stdout == ""


def test_a_results_file_is_never_written_into_an_input_dataset_folder(tmp_path):
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "part.parquet").write_bytes((TRACES / "canonical.parquet").read_bytes())
    result = _run("analyze", dataset, "-o", dataset / "results.parquet")
    _one_line_error(result, "results.parquet", "inside the input folder")
    assert sorted(p.name for p in dataset.iterdir()) == ["part.parquet"]
    assert _run("analyze", dataset, "-o", tmp_path / "results.parquet").returncode == 0


# --- launch options ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, dims", [("0x20", (32, 1, 1)), ("32x8", (32, 8, 1)), ("0x20x8", (32, 8, 1)),
                                        ("0x20,8", (32, 8, 1)), ("10x8", (10, 8, 1)), ("8,0x10,2", (8, 16, 2))])
def test_block_sizes_read_hex_per_dimension(text, dims):
    from traceconf.commands.analyze import parse_dims
    assert parse_dims(text, "--block") == dims


@pytest.mark.parametrize("value, ok", [("70000", False), ("65535", True), ("-1", True), ("-32769", False)])
def test_param_values_are_checked_against_the_parameter_type(value, ok):
    from traceconf.emulate.launch import Launch, resolve_params
    from traceconf.errors import InputError
    kernel = {"kernel": "k", "params": [{"name": "k_param_0", "type": "u16", "bytes": 2}]}
    launch = Launch(params={"0": value})
    if ok:
        assert resolve_params(launch, kernel) == {"k_param_0": int(value)}
    else:
        with pytest.raises(InputError, match=rf"--param 0: .*\(\.u16\) {value} is out of range"):
            resolve_params(launch, kernel)


def test_param_out_of_range_is_one_line_naming_the_option():
    result = _run("analyze", TRANSPOSE, "--block", "32,8", "--level", "ptx", "-k", "transpose_unpadded",
                  "-p", "2=70000000000")
    _one_line_error(result, "--param 2: ", "70000000000 is out of range")


# --- workers and schedulers ----------------------------------------------------------------------------

@pytest.mark.parametrize("address, message", [
    ("", "the scheduler address is empty"), ("  ", "the scheduler address is empty"),
    ("tcp://localhost:99999999999999999999", "port 99999999999999999999 is out of range"),
    ("nonsense://x", "is not a scheduler address"), ("tcp://:8786", "is not a scheduler address"),
])
def test_bad_scheduler_addresses_are_refused_before_any_work(address, message):
    result = _run("analyze", TRANSPOSE, "--block", "32,8", "--level", "ptx", "--scheduler", address, timeout=60)
    _one_line_error(result, "--scheduler: ", message)


def test_a_cluster_without_workers_is_an_error_after_a_bounded_wait():
    import logging
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    from traceconf.cluster import connect
    from traceconf.errors import InputError
    cluster = LocalCluster(n_workers=0, processes=False, dashboard_address=None, silence_logs=logging.ERROR)
    try:
        with pytest.raises(InputError, match="has no workers after 1 s"):
            connect(cluster.scheduler_address, wait=1)
    finally:
        cluster.close()


@pytest.mark.parametrize("requested, units, memory, expected", [
    (1000, 2, 64 << 30, 2), (4, 100, 64 << 30, 4), (1000, 1000, 1 << 30, 4), (8, 0, 64 << 30, 1),
    (8, 8, 1 << 20, 1)])
def test_workers_never_outnumber_the_units_or_the_memory(requested, units, memory, expected):
    from traceconf.cluster import fit_workers
    workers, note = fit_workers(requested, units, memory)
    assert workers == expected
    assert (note is None) == (workers == requested)


# --- --resume on damaged folders -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_suite(tmp_path_factory):
    from tests.test_distributed import make_suite
    return make_suite(tmp_path_factory.mktemp("suite"), apps=1, ctas=4)


def _run_suite(suite: Path, out: Path, resume: bool = False):
    from traceconf.distributed import run_many
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.rules import load_rule_sets
    ran = []
    result = run_many([suite], None, LaunchRequest(), load_rule_sets(["sm_90"], "sm_90"), output=out,
                      resume=resume, progress=lambda unit, *_: ran.append(unit))
    return result, ran


def test_resume_rewrites_a_truncated_partition(small_suite, tmp_path):
    from traceconf.distributed.dataset import read_dataset
    out = tmp_path / "results"
    _run_suite(small_suite, out)
    expected = read_dataset(out)
    partition = sorted(out.rglob("*.parquet"))[0]
    partition.write_bytes(partition.read_bytes()[:-20])            # footer gone
    (_, failures, summary), ran = _run_suite(small_suite, out, resume=True)
    assert failures == [] and len(ran) == 1 and summary.skipped == 3
    assert read_dataset(out).equals(expected)


def test_resume_rewrites_a_partition_of_another_row_count(small_suite, tmp_path):
    import pyarrow.parquet as pq
    out = tmp_path / "results"
    _run_suite(small_suite, out)
    partition = sorted(out.rglob("*.parquet"))[0]
    table = pq.read_table(partition)
    pq.write_table(table.slice(0, table.num_rows - 1), partition)   # a whole file, one row short
    (_, failures, _), ran = _run_suite(small_suite, out, resume=True)
    assert failures == [] and len(ran) == 1
    assert pq.read_table(partition).num_rows == table.num_rows


def test_a_manifest_that_is_a_folder_is_refused_before_the_analysis(small_suite, tmp_path):
    out = tmp_path / "results"
    (out / "_manifest.json").mkdir(parents=True)
    for resume in ([], ["--resume"]):
        result = _run("analyze", small_suite, "-o", out, *resume)
        _one_line_error(result, f"{out / '_manifest.json'}: ")
        assert "unit(s) analysed" not in result.stderr


def test_resume_rewrites_a_partition_changed_inside(small_suite, tmp_path):
    """A flipped byte inside a page keeps the footer and the row count: the recorded digest sees it."""
    from traceconf.distributed.dataset import read_dataset
    out = tmp_path / "results"
    _run_suite(small_suite, out)
    expected = read_dataset(out)
    partition = sorted(out.rglob("*.parquet"))[0]
    data = bytearray(partition.read_bytes())
    data[len(data) // 3] ^= 0x40
    partition.write_bytes(bytes(data))
    (_, failures, _), ran = _run_suite(small_suite, out, resume=True)
    assert failures == [] and len(ran) == 1
    assert read_dataset(out).equals(expected)


@pytest.mark.parametrize("edit", ["digest key", "rows key", "no digests"])
def test_resume_does_not_trust_a_partition_the_manifest_no_longer_vouches_for(small_suite, tmp_path, edit):
    """Found by the issue-25 campaign (fuzz_surfaces.py --surface resume --seed 2521): a manifest whose digest
    (or row count) of a partition was lost or renamed skipped that partition's checks, so a partition changed
    inside was kept.  Without both, the unit runs again."""
    import json

    from traceconf.distributed.dataset import read_dataset
    out = tmp_path / "results"
    _run_suite(small_suite, out)
    expected = read_dataset(out)
    manifest = json.loads((out / "_manifest.json").read_text())
    unit = next(u for u in manifest["units"] if u["partitions"])
    partition = unit["partitions"][0]
    if edit == "digest key":
        unit["digests"] = {partition + "x": unit["digests"][partition]}
    elif edit == "rows key":
        unit["rows"] = {}
    else:
        del unit["digests"]
    (out / "_manifest.json").write_text(json.dumps(manifest))
    data = bytearray((out / partition).read_bytes())
    data[len(data) // 3] ^= 0x40                       # footer and row count kept
    (out / partition).write_bytes(bytes(data))
    (_, failures, _), ran = _run_suite(small_suite, out, resume=True)
    assert failures == [] and any(u.key == unit["key"] for u in ran)
    assert read_dataset(out).equals(expected)


@pytest.mark.parametrize("edit", ["partitions emptied", "kernels lost"])
def test_a_unit_whose_manifest_lost_its_partitions_is_not_written(small_suite, tmp_path, edit):
    """Found by the issue-25 campaign (resume, seed 2521, 3 of 100,000): a done unit whose partition list was
    emptied vouched for nothing and was skipped, its damaged partition kept."""
    import json

    from traceconf.distributed.dataset import Dataset
    from traceconf.distributed.units import plan
    out = tmp_path / "results"
    _run_suite(small_suite, out)
    manifest = json.loads((out / "_manifest.json").read_text())
    entry = next(u for u in manifest["units"] if u["partitions"])
    if edit == "partitions emptied":
        entry["partitions"] = []
    else:
        del entry["kernels"]
    (out / "_manifest.json").write_text(json.dumps(manifest))
    unit = next(u for u in plan([small_suite])[0] if u.key == entry["key"])
    assert not Dataset(out, ["sm_90"], resume=True).written(unit)


@pytest.mark.parametrize("body", ["[]", '{"devices": "sm_90", "units": []}', '{"devices": ["sm_90"], "units": [1]}',
                                  '{"devices": ["sm_90"], "units": [{"key": 3}]}', "not json", "[" * 100000])
def test_resume_with_a_manifest_of_another_shape_is_a_clean_error(small_suite, tmp_path, body):
    out = tmp_path / "results"
    out.mkdir()
    (out / "_manifest.json").write_text(body)
    result = _run("analyze", small_suite, "-o", out, "--resume")
    _one_line_error(result, f"{out / '_manifest.json'}: not a traceconf results manifest")
    assert (out / "_manifest.json").read_text() == body


# --- overlapping inputs: the same file reached twice is one input ---------------------------------------

def _results(*inputs):
    from traceconf.analyses.results import results_table
    from traceconf.distributed import run_many
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.rules import load_rule_sets
    analyses, failures, summary = run_many(list(inputs), None, LaunchRequest(), load_rule_sets(["sm_90"], "sm_90"))
    assert failures == []
    table = results_table(analyses, ["sm_90"]).drop_columns(["input"])
    return table.sort_by([(k, "ascending") for k in ("kernel", "instruction")]), summary.notes


def test_overlapping_inputs_are_counted_once_with_a_note(small_suite, tmp_path):
    app = small_suite / "app0"
    once, notes = _results(app)
    assert notes == [] and once.num_rows > 0
    link = tmp_path / "link"
    link.symlink_to(app)
    for twice in ([app, app], [app, app / "kernelslist.g"], [app, link], [app / "kernelslist.g", app]):
        table, notes = _results(*twice)
        assert table.equals(once), twice
        assert len(notes) == 1 and "counted once" in notes[0]


def test_different_inputs_with_the_same_kernels_stay_apart(small_suite, tmp_path):
    import shutil
    app = small_suite / "app0"
    copy = tmp_path / "copy"
    shutil.copytree(app, copy)
    once, _ = _results(app)
    both, notes = _results(app, copy)
    assert notes == [] and both.num_rows == 2 * once.num_rows
    assert sum(both.column("wavefronts").to_pylist()) == 2 * sum(once.column("wavefronts").to_pylist())


# --- internal errors on bad input become located errors --------------------------------------------------

RULES = Path(__file__).resolve().parents[1] / "traceconf" / "rules"


@pytest.mark.parametrize("old, new, message", [
    ('kinds = ["ld"]', 'kinds = [["ld"]]', "expected a non-empty list of kinds"),
    ('kinds = ["ld"]', "kinds = [1, {a = 1}]", "expected a non-empty list of kinds"),
])
def test_rule_file_values_of_another_shape(tmp_path, old, new, message):
    rule_file = _replaced(RULES / "cdna4.toml", tmp_path / "r.toml", old, new)
    result = _run("analyze", TRANSPOSE, "--block", "32,8", "--level", "ptx", "--device", rule_file)
    _one_line_error(result, f"{rule_file}:29:", message)


SASS = Path(__file__).resolve().parent / "data" / "sass"


@pytest.mark.parametrize("old, new, message", [
    ("/*0030*/", "/*fffffffffffffffffff0*/", "address fffffffffffffffffff0 is out of range"),
    ('"transpose.cu", line 10', '"transpose.cu", line 99999999999999999', "line number 99999999999999999 is out"),
    ("R7, 0x4, R8", "R7, 0x4ffffffffffffffffffffffffffffffff, R8", "does not fit in 64 bits"),
    ("c[0x0][0x28]", "c[0x0][0xffffffffffffffffffffffff28]", "does not fit in 64 bits"),
])
def test_sass_listing_numbers_are_range_checked(tmp_path, old, new, message):
    listing = _replaced(SASS / "transpose.sm_90.nvdisasm.sass", tmp_path / "t.sass", old, new)
    line = next(n for n, text in enumerate(listing.read_text().splitlines(), 1) if new in text)
    result = _run("analyze", listing, "--block", "32,8")
    _one_line_error(result, f"{listing}:{line}: ", message)


def _json_listing(tmp_path: Path, edit) -> Path:
    import json
    document = json.loads((SASS / "transpose.sm_90.json").read_text())
    edit(document)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda d: d[1][0]["sass-instructions"][3].pop("opcode"), "function 0 (_Z14transpose_tileILi1EEvPfPKfi), "
                                                              "instruction 3: no opcode"),
    (lambda d: d[1][0]["sass-instructions"][3].update(opcode=7), "instruction 3: no opcode"),
    (lambda d: d[1][0]["sass-instructions"][3].update(operands=[1]), "instruction 3: operands is not text"),
    (lambda d: d[1][0]["sass-instructions"].__setitem__(2, None), "instruction 2: no opcode"),
    (lambda d: d[1][0].pop("function-name"), "function 0: no function-name"),
    (lambda d: d[1].__setitem__(0, "x"), "function 0: no function-name"),
    (lambda d: d[0]["SM"]["version"].update(major="9x"), "SM version '9x'.0 is not two small numbers"),
    (lambda d: d.__setitem__(1, {}), "expected [header, [function, ...]]"),
])
def test_nvdisasm_json_records_of_another_shape(tmp_path, edit, message):
    listing = _json_listing(tmp_path, edit)
    _one_line_error(_run("analyze", listing, "--block", "32,8"), f"{listing}:1:1: ", message)


NVBIT = Path(__file__).resolve().parents[1] / "traces" / "nvbit-memtrace.log"


def test_nvbit_access_before_the_first_launch_is_skipped_with_skip_bad(tmp_path):
    lines = NVBIT.read_text().splitlines(keepends=True)
    access = next(line for line in lines if " - CTA " in line)
    early = tmp_path / "early.log"
    early.write_text(access + "".join(lines))
    result = _run("analyze", early, "--skip-bad")
    assert result.returncode == 0, result.stderr
    assert "1 malformed line(s) skipped (--skip-bad)" in result.stdout
    plain = _run("analyze", NVBIT, "--format", "csv").stdout
    assert _run("analyze", early, "--skip-bad", "--format", "csv").stdout == plain.replace(str(NVBIT), str(early))
    _one_line_error(_run("analyze", early), f"{early}:1:1: access line before any kernel launch line")
    alone = tmp_path / "alone.log"
    alone.write_text(access)
    _one_line_error(_run("analyze", alone, "--skip-bad"), f"{alone}: no kernel launch line; 1 malformed line")


# --- the NVIDIA tools: errors name the user's binary or option ---------------------------------------------

def _tools(*names: str):
    from traceconf import tools
    return pytest.mark.skipif(any(tools.locate(n) is None for n in names), reason=f"needs {', '.join(names)}")


@_tools("cuobjdump")
@pytest.mark.parametrize("name, keep", [("trunc.cubin", 0.5), ("trunc.fatbin", 0.33)])
def test_tool_errors_name_the_users_binary(tmp_path, name, keep):
    source = SASS / ("matmul.sm_90.cubin" if name.endswith("cubin") else "transpose.sm_90.fatbin")
    data = source.read_bytes()
    binary = tmp_path / name
    binary.write_bytes(data[:int(len(data) * keep)])
    result = _run("analyze", binary, "--block", "32", env={"TRACECONF_CACHE": str(tmp_path / "cache")})
    line = _one_line_error(result, f"{binary}: ")
    assert "/tmp/traceconf-" not in result.stderr and "input.bin" not in line


@_tools("ptxas")
@pytest.mark.parametrize("option", ["-O99999999999999999999999", "--maxrregcount=abc", "--bogus"])
def test_ptxas_option_errors_name_the_option(tmp_path, option):
    result = _run("analyze", TRANSPOSE, "--block", "32,8", "--level", "sass", f"--ptxas-option={option}",
                  env={"TRACECONF_CACHE": str(tmp_path / "cache")})
    line = _one_line_error(result, f"--ptxas-option: ptxas rejects {option}")
    assert str(TRANSPOSE) not in line


# --- .tracez: a large sub-chunk is decompressed and parsed in bounded pieces -----------------------------

def _one_subchunk_tracez(path: Path, megabytes: float) -> int:
    """A .tracez whose only warp is one sub-chunk of about ``megabytes`` MiB of lines (the benchmark's input)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    try:
        from bench_tracez_subchunk import one_subchunk_tracez
    finally:
        sys.path.pop(0)
    return one_subchunk_tracez(path, megabytes)


def test_a_large_subchunk_streams_in_pieces_of_the_block_size(tmp_path):
    from traceconf.traces.tracez import TracezFile
    tracez = tmp_path / "k.tracez"
    lines = _one_subchunk_tracez(tracez, 1.5)
    with TracezFile(tracez, block_bytes=1 << 16) as whole:
        (cta,) = list(whole.ctas())
        ((insts, offset, counts),) = cta["warps"]
        assert counts == (lines,) and lines > 20_000
        pieces = list(whole.subchunks(insts, offset, counts))
    assert len(pieces) > 10 and max(map(len, pieces)) <= 2 << 16
    assert all(piece.endswith(b"\n") for piece in pieces)
    assert b"".join(pieces).count(b"\n") == lines


def test_trace_reading_stops_at_the_memory_limit(tmp_path):
    from traceconf.pipeline import run_trace
    from traceconf.rules import load_rule_sets
    tracez = tmp_path / "k.tracez"
    _one_subchunk_tracez(tracez, 0.1)
    done, failures = run_trace(tracez, None, load_rule_sets(["sm_90"]), memory_limit=1 << 20)
    assert done == [] and "stopped at the memory limit of 0.00 GiB" in failures[0].error.message
    assert str(tracez) == failures[0].error.file
    done, failures = run_trace(tracez, None, load_rule_sets(["sm_90"]))
    assert failures == [] and done
