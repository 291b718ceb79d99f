"""Suites of traces as tasks: the same results on one process, a process pool and a Dask LocalCluster,
a results dataset readable by pandas/polars/DuckDB/dask, faults that lose nothing, --resume.

The trace sets are generated here (scripts/make_sample_traces.py's kernel, more CTAs); the clusters are
local (2 worker processes), started once per test that needs one and closed at its end.
"""

from __future__ import annotations

import json
import lzma
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from test_traces_samples import samples
from traceconf.analyses.results import results_table
from traceconf.distributed import run_many
from traceconf.distributed.dataset import MANIFEST, partition_path, read_dataset
from traceconf.distributed.executors import Executor, choose_executor
from traceconf.distributed.units import plan
from traceconf.emulate.launch import LaunchRequest
from traceconf.pipeline import run_file
from traceconf.rules import load_rule_sets

RULES = load_rule_sets(["sm_90", "sm_75"], "sm_90")
DEVICES = [r.name for r in RULES]
KEY = ["input", "kernel", "device", "instruction"]


def big_traceg(kernel_id: int, ctas: int = 40) -> str:
    """The sample kernel over ``ctas`` CTAs (the same program in every warp, CTA ids renumbered)."""
    text = samples.traceg(version=5, kernel_id=kernel_id)
    head, body = text[:text.index("#BEGIN_TB")], text[text.index("#BEGIN_TB"):]
    first = body[:body.index("#BEGIN_TB", 1)]
    blocks = [first.replace("thread block = 0,0,0", f"thread block = {c},0,0") for c in range(ctas)]
    return head.replace("-grid dim = (2,1,1)", f"-grid dim = ({ctas},1,1)") + "".join(blocks)


def make_suite(root: Path, apps: int = 2, ctas: int = 40) -> Path:
    """apps × 4 launches: plain .traceg, .traceg.xz, .tracez, and a second launch of the same kernel."""
    for app in range(apps):
        folder = root / f"app{app}"
        folder.mkdir(parents=True)
        (folder / "kernel-1.traceg").write_text(big_traceg(1, ctas))
        (folder / "kernel-2.traceg.xz").write_bytes(lzma.compress(big_traceg(2, ctas + app).encode(), preset=0))
        (folder / "kernel-3.tracez").write_bytes(samples.tracez(big_traceg(3, ctas + 2 * app), subchunk_insts=64))
        (folder / "kernel-4.traceg").write_text(big_traceg(4, 3))
        (folder / "kernelslist.g").write_text("MemcpyHtoD,0x7f3a7d400000,4096\nkernel-1.traceg\nkernel-2.traceg.xz\n"
                                              "kernel-3.tracez\nkernel-4.traceg\n")
    return root


def canonical_table(path: Path, row_group_size: int = 100) -> Path:
    """Two kernels' accesses as one canonical Parquet table of small row groups (executions straddle some)."""
    a = samples.expected_accesses("kernel_a").to_table()
    b = samples.expected_accesses("kernel_b").to_table()
    pq.write_table(pa.concat_tables([a, b, ]), path, row_group_size=row_group_size)
    return path


def single_process(inputs: list[Path]) -> pa.Table:
    analyses = []
    for path in inputs:
        done, failures = run_file(path, None, LaunchRequest(), RULES)
        assert failures == []
        analyses += done
    return results_table(analyses, DEVICES).sort_by([(k, "ascending") for k in KEY])


def table_of(analyses) -> pa.Table:
    return results_table(analyses, DEVICES).sort_by([(k, "ascending") for k in KEY])


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return make_suite(tmp_path_factory.mktemp("suite"))


@pytest.fixture(scope="module")
def expected(suite):
    return single_process(sorted(suite.iterdir()))


# ----------------------------------------------------------------------------- planning
def test_plan_names_launches_like_the_single_process_reader(suite, tmp_path):
    units, failures = plan([suite])
    assert failures == [] and len(units) == 8
    assert [u.kernel for u in units[:4]] == [samples.KERNEL] + [f"{samples.KERNEL}#{n}" for n in (2, 3, 4)]
    assert {u.source for u in units} == {str(suite / "app0"), str(suite / "app1")}
    units, _ = plan([suite / "app0"], kernels=[f"{samples.KERNEL}#3"])
    assert [Path(u.path).name for u in units] == ["kernel-3.tracez"]
    units, _ = plan([str(suite / "app*")])  # a glob the shell did not expand
    assert len(units) == 8
    units, failures = plan([str(tmp_path / "nothing*")])
    assert units == [] and "no file matches" in failures[0].line()


def test_parquet_row_groups_are_cut_only_where_no_execution_straddles(tmp_path):
    path = canonical_table(tmp_path / "accesses.parquet", row_group_size=32)
    units, _ = plan([path], rows_per_unit=1)
    table = pq.read_table(path)
    meta = pq.ParquetFile(path).metadata
    starts = [sum(meta.row_group(g).num_rows for g in range(u.part[0])) for u in units]
    assert len(units) > 3 and units[0].part[0] == 0 and units[-1].part[1] == meta.num_row_groups
    execution, kernel = table.column("execution").to_pylist(), table.column("kernel").to_pylist()
    for start in starts[1:]:
        assert (kernel[start - 1], execution[start - 1]) != (kernel[start], execution[start])
    # the shares of a kernel add up to the single-process counts exactly
    analyses, failures, summary = run_many([path], None, LaunchRequest(), RULES, rows_per_unit=1)
    assert failures == [] and summary.units == len(units)
    assert table_of(analyses).equals(single_process([path]))


# ----------------------------------------------------------------------------- executors
def test_local_executor_is_the_single_process_run(suite, expected):
    analyses, failures, summary = run_many([suite], None, LaunchRequest(), RULES)
    assert failures == [] and summary.units == 8
    assert table_of(analyses).equals(expected)


def test_process_pool_gives_the_same_results(suite, expected):
    analyses, failures, _ = run_many([suite], None, LaunchRequest(), RULES, executor=Executor("processes", 2))
    assert failures == []
    assert table_of(analyses).equals(expected)


def test_without_dask_workers_fall_back_to_a_process_pool(monkeypatch):
    import traceconf.distributed.executors as executors
    monkeypatch.setattr(executors, "dask_available", lambda: False)
    executor = choose_executor(2, None)
    assert executor.kind == "processes" and "process pool" in executor.notes[0]
    with pytest.raises(Exception, match="needs Dask"):
        choose_executor(None, "tcp://127.0.0.1:8786")
    assert choose_executor(None, None).kind == "local"


@pytest.fixture
def cluster():
    pytest.importorskip("distributed")
    from traceconf.distributed.executors import local_cluster
    with local_cluster(2) as local:
        yield local


def test_local_dask_cluster_dataset_matches_one_process(suite, expected, cluster, tmp_path):
    out = tmp_path / "results"
    table = canonical_table(tmp_path / "accesses.parquet")
    inputs = [suite, table]
    want = pa.concat_tables([expected, single_process([table])]).sort_by([(k, "ascending") for k in KEY])
    analyses, failures, summary = run_many(inputs, None, LaunchRequest(), RULES,
                                           executor=Executor("dask", scheduler=cluster.scheduler_address),
                                           output=out, rows_per_unit=150)
    assert failures == [] and summary.units > 9
    assert table_of(analyses).equals(want)
    # the dataset: one file per (input, kernel), complete, readable by every tool
    files = sorted(p for p in out.rglob("*.parquet"))
    assert len(files) == 8 + 2
    assert partition_path(out, str(suite / "app1"), samples.KERNEL + "#3") in files
    assert read_dataset(out).sort_by([(k, "ascending") for k in KEY]).equals(want)
    import duckdb
    import pandas as pd
    import polars as pl
    frame = pd.read_parquet(out)
    assert len(frame) == want.num_rows and frame["wavefronts"].sum() == pa.compute.sum(want["wavefronts"]).as_py()
    assert pl.read_parquet(out / "**" / "*.parquet").height == want.num_rows
    query = f"select sum(excess_wavefronts) from read_parquet('{out}/**/*.parquet')"
    total = duckdb.connect().execute(query).fetchall()[0][0]
    assert total == pa.compute.sum(want["excess_wavefronts"]).as_py()
    dd = pytest.importorskip("dask.dataframe")
    assert len(dd.read_parquet(str(out)).compute()) == want.num_rows
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["missing"] == [] and all(u["status"] == "done" for u in manifest["units"])
    assert not list(out.rglob(".*.tmp"))


def test_killed_dask_worker_loses_nothing(suite, expected, cluster, tmp_path):
    from distributed import Client
    with Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
    killed = []

    def kill_one(unit, seconds, kernels, failures):
        if not killed:
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    analyses, failures, summary = run_many([suite], None, LaunchRequest(), RULES,
                                           executor=Executor("dask", scheduler=cluster.scheduler_address),
                                           output=tmp_path / "results", progress=kill_one)
    assert killed and failures == [] and summary.lost == 0
    assert table_of(analyses).equals(expected)


def test_killed_pool_worker_then_resume_completes_the_rest(suite, expected, tmp_path):
    import multiprocessing
    out = tmp_path / "results"
    killed = []

    def kill_one(unit, seconds, kernels, failures):
        children = multiprocessing.active_children()
        if not killed and children:
            os.kill(children[0].pid, signal.SIGKILL)
            killed.append(children[0].pid)

    analyses, failures, summary = run_many([suite], None, LaunchRequest(), RULES,
                                           executor=Executor("processes", 2), output=out, progress=kill_one)
    assert killed and summary.lost >= 1 and len(failures) == summary.lost
    assert all("worker process died" in f.line() for f in failures)
    assert all(f.line().startswith(str(suite)) for f in failures)  # each names its file
    manifest = json.loads((out / MANIFEST).read_text())
    assert len(manifest["missing"]) == summary.lost
    written = len(list(out.rglob("*.parquet")))
    assert written == 8 - summary.lost
    ran = []
    analyses, failures, summary = run_many([suite], None, LaunchRequest(), RULES, executor=Executor("processes", 2),
                                           output=out, resume=True, progress=lambda u, *_: ran.append(u))
    assert failures == [] and len(ran) == 8 - written and summary.skipped == written
    assert read_dataset(out).sort_by([(k, "ascending") for k in KEY]).equals(expected)
    assert json.loads((out / MANIFEST).read_text())["missing"] == []


def test_resume_reads_only_what_is_missing_or_changed(suite, expected, tmp_path):
    out = tmp_path / "results"
    run_many([suite], None, LaunchRequest(), RULES, output=out)
    partition_path(out, str(suite / "app0"), samples.KERNEL + "#2").unlink()
    ran = []
    run_many([suite], None, LaunchRequest(), RULES, output=out, resume=True, progress=lambda u, *_: ran.append(u))
    assert [Path(u.path).name for u in ran] == ["kernel-2.traceg.xz"]
    assert read_dataset(out).sort_by([(k, "ascending") for k in KEY]).equals(expected)
    ran.clear()
    run_many([suite], None, LaunchRequest(), load_rule_sets(["sm_90"], "sm_90"), output=out, resume=True,
             progress=lambda u, *_: ran.append(u))
    assert len(ran) == 8  # other devices: other columns, nothing is reused


def test_corrupt_and_missing_inputs_fail_alone(tmp_path):
    suite = make_suite(tmp_path / "suite", apps=1, ctas=4)
    app = suite / "app0"
    data = (app / "kernel-3.tracez").read_bytes()
    (app / "kernel-3.tracez").write_bytes(data[:len(data) // 2] + data[len(data) // 2 + 16:])
    (app / "kernel-1.traceg").write_text((app / "kernel-1.traceg").read_text().replace("insts = 17", "insts = 18", 1))
    (app / "kernelslist.g").write_text((app / "kernelslist.g").read_text() + "kernel-9.traceg\n")
    out = tmp_path / "results"
    analyses, failures, _ = run_many([suite], None, LaunchRequest(), RULES, output=out)
    lines = [f.line() for f in failures]
    assert len(lines) == 3
    assert any(line.startswith(f"{app / 'kernelslist.g'}:6:1: kernel trace kernel-9.traceg not found") for line in lines)
    assert any(line.startswith(f"{app / 'kernel-3.tracez'}: ") and "corrupt .tracez" in line for line in lines)
    assert any(line.startswith(f"{app / 'kernel-1.traceg'}:") and "insts = 18" in line for line in lines)
    assert {a.kernel for a in analyses} >= {samples.KERNEL + "#2", samples.KERNEL + "#4"}
    missing = json.loads((out / MANIFEST).read_text())["missing"]
    assert {Path(m["path"]).name for m in missing} == {"kernel-1.traceg", "kernel-3.tracez", "kernelslist.g"}


def test_cli_workers_writes_the_dataset_and_reports_failures(tmp_path):
    pytest.importorskip("distributed")
    suite = make_suite(tmp_path / "suite", apps=1, ctas=4)
    (suite / "app0" / "kernelslist.g").write_text((suite / "app0" / "kernelslist.g").read_text() + "kernel-9.traceg\n")
    out = tmp_path / "results"
    cli = [sys.executable, "-m", "traceconf", "analyze"]
    run = subprocess.run(cli + [str(suite), "--workers", "2", "-o", str(out), "-f", "csv", "-d", "sm_90",
                                "-d", "sm_75"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert f"{suite / 'app0' / 'kernelslist.g'}:6:1: kernel trace kernel-9.traceg not found" in run.stderr
    assert "4 kernel(s) written" in run.stderr
    assert read_dataset(out).num_rows == run.stdout.count("\n") - 1
    (suite / "app0" / "kernelslist.g").write_text((suite / "app0" / "kernelslist.g").read_text().replace(
        "kernel-9.traceg\n", ""))
    run = subprocess.run(cli + [str(suite), "-o", str(out), "--resume", "-d", "sm_90", "-d", "sm_75"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "4 unit(s) already there (--resume)" in run.stderr
    run = subprocess.run(cli + [str(suite), "--resume", "-o", str(tmp_path / "r.parquet")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "--resume needs -o FOLDER" in run.stderr


def test_hive_partitioned_canonical_dataset(tmp_path):
    """A canonical dataset partitioned by kernel (pyarrow's hive layout, no kernel column in the files)."""
    import pyarrow.dataset as ds
    table = pa.concat_tables([samples.expected_accesses("k<a>").to_table(),
                              samples.expected_accesses("k_b").to_table()])
    ds.write_dataset(table, tmp_path / "accesses", format="parquet", partitioning=["kernel"],
                     partitioning_flavor="hive")
    assert "kernel" not in pq.read_schema(next((tmp_path / "accesses").rglob("*.parquet"))).names
    analyses, failures, summary = run_many([tmp_path / "accesses"], None, LaunchRequest(), RULES)
    assert failures == [] and summary.units == 2
    assert sorted(a.kernel for a in analyses) == ["k<a>", "k_b"]
    pq.write_table(samples.expected_accesses("k<a>").to_table(), tmp_path / "a.parquet")
    [reference], _ = run_file(tmp_path / "a.parquet", None, LaunchRequest(), RULES)
    mine = next(a for a in analyses if a.kernel == "k<a>")
    assert mine.results.sort_by("instruction").drop_columns(["kernel"]).equals(
        reference.results.sort_by("instruction").drop_columns(["kernel"]))
    # without a hive folder the stem names it (this used to fail inside pyarrow)
    pq.write_table(samples.expected_accesses("x").to_table().drop_columns(["kernel"]), tmp_path / "solo.parquet")
    [solo], failures = run_file(tmp_path / "solo.parquet", None, LaunchRequest(), RULES)
    assert failures == [] and solo.kernel == "solo"


def test_large_tracez_is_cut_into_cta_ranges(tmp_path):
    """A .tracez kernel larger than the share size: tasks of CTA ranges (found from its index), added exactly."""
    text = big_traceg(1, ctas=12)
    path = tmp_path / "kernel-1.tracez"
    path.write_bytes(samples.tracez(text, subchunk_insts=5))
    units, _ = plan([path], tracez_bytes_per_unit=path.stat().st_size // 5)
    assert len(units) >= 4 and units[0].part[0] == 0 and units[-1].part[1] == 12
    assert all(a.part[1] == b.part[0] for a, b in zip(units, units[1:]))
    assert len({u.group for u in units}) == 1 and {u.kernel for u in units} == {samples.KERNEL}
    analyses, failures, summary = run_many([path], None, LaunchRequest(), RULES,
                                           tracez_bytes_per_unit=path.stat().st_size // 5)
    assert failures == [] and summary.units == len(units) and len(analyses) == 1
    assert table_of(analyses).equals(single_process([path]))
    # a share's error lines are those of the whole file
    from traceconf.traces.tracez import TracezFile
    with TracezFile(path) as file:
        whole = list(file.blocks())
        share = list(file.blocks((5, 8)))
    body = b"".join(t for t, _ in whole).split(b"\n")
    first_line = share[0][1]
    offset = first_line - whole[0][1]
    assert body[offset:offset + 4] == share[0][0].split(b"\n")[:4] and body[offset + 3] == b"thread block = 5,0,0"


def test_results_folder_inside_an_input_folder_is_refused(tmp_path):
    """Results written into a canonical dataset's folder would be read back as accesses next time: refused before
    any work, through the CLI too; a folder beside the input is fine and holds only complete files."""
    import pyarrow.dataset as ds
    from traceconf.errors import InputError
    ds.write_dataset(samples.expected_accesses("k_a").to_table(), tmp_path / "accesses", format="parquet",
                     partitioning=["kernel"], partitioning_flavor="hive")
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "accesses").rglob("*"))
    for output in (tmp_path / "accesses", tmp_path / "accesses" / "results"):
        with pytest.raises(InputError, match="the results folder is inside the input folder"):
            run_many((p for p in [tmp_path / "accesses"]), None, LaunchRequest(), RULES, output=output)
    cli = subprocess.run([sys.executable, "-m", "traceconf", "analyze", str(tmp_path / "accesses"), "-o",
                          str(tmp_path / "accesses")], capture_output=True, text=True)
    assert cli.returncode == 2 and "the results folder is inside the input folder" in cli.stderr
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "accesses").rglob("*")) == before
    analyses, failures, _ = run_many([tmp_path / "accesses"], None, LaunchRequest(), RULES, output=tmp_path / "out")
    assert failures == [] and len(analyses) == 1
    names = sorted(p.name for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert names[0] == MANIFEST and len(names) == 2 and names[1].endswith(".parquet")
