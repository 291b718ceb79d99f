"""One program path: every entry point (one input, many inputs, --workers, the Python API) reads an input as
the same program at the same default level and gives the same per-instruction results."""

from __future__ import annotations

import inspect
import io
import shutil

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from typer.testing import CliRunner

import traceconf
from conftest import FIXTURES
from traceconf.cli import app
from traceconf.commands import analyze as analyze_command
from traceconf.programs import DEFAULT_LEVEL
from traceconf.rules import DEFAULT_DEVICE

ROW4 = "_Z10row4_loadsILi4EEvPKfPf"
#: (fixture, kernel, launch options): a hand-written PTX file and nvcc's PTX with kernels.toml launches
CASES = {
    "transpose": (FIXTURES / "emulate" / "transpose.ptx", "transpose_unpadded", ["--block", "32,8", "--grid", "2,2"]),
    "row4_loads": (FIXTURES / "cuda" / "vectorize.sm_90.ptx", ROW4, ["--block", "64"]),
    "matmul": (FIXTURES / "cuda" / "matmul.sm_90.ptx", ".*Li16.*", ["--block", "16,16", "--grid", "2,2",
                                                                    "--param", "3=32"]),
}
#: the columns that say what was counted (``input`` names the file, which the copies change)
COUNTED = ["kernel", "device", "instruction", "kind", "width_bits", "text", "ptx_line", "pc", "executions",
           "wavefronts", "ideal_wavefronts", "excess_wavefronts", "max_ways", "resolved"]


def cli_rows(*args) -> pa.Table:
    result = CliRunner().invoke(app, ["analyze", *map(str, args), "-f", "csv"])
    assert result.exit_code == 0, result.output
    table = pacsv.read_csv(io.BytesIO(result.stdout.encode()))
    return table


def counted(table: pa.Table, input_path=None) -> list[dict]:
    if input_path is not None:
        table = table.filter(pa.compute.equal(table.column("input"), str(input_path)))
    rows = [{k: row[k] for k in COUNTED} for row in table.to_pylist()]
    return sorted(rows, key=lambda row: (row["kernel"], row["device"], row["instruction"]))


@pytest.fixture(params=sorted(CASES))
def case(request, tmp_path):
    path, kernel, options = CASES[request.param]
    copy = tmp_path / f"copy_{path.name}"
    shutil.copy(path, copy)
    single = counted(cli_rows(path, "-k", kernel, *options))
    assert single, "the fixture has shared-memory instructions"
    return path, copy, kernel, options, single


def test_many_inputs_count_as_one_input_does(case):
    path, copy, kernel, options, single = case
    both = cli_rows(path, copy, "-k", kernel, *options)
    assert counted(both, path) == single and counted(both, copy) == single


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_count_as_one_input_does(case, workers):
    path, copy, kernel, options, single = case
    rows = cli_rows(path, copy, "-k", kernel, *options, "--workers", workers)
    assert counted(rows, path) == single and counted(rows, copy) == single


def test_the_api_counts_as_the_cli_does(case):
    path, _, kernel, options, single = case
    launch = dict(zip(options[::2], options[1::2]))
    params = dict(item.split("=") for item in [launch["--param"]]) if "--param" in launch else None
    frame = traceconf.analyze_ptx(path, kernel=kernel, block=[int(d) for d in launch["--block"].split(",")],
                                  grid=[int(d) for d in launch.get("--grid", "1").split(",")],
                                  params={k: int(v) for k, v in (params or {}).items()})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    rows = counted(table)
    for row in rows:                    # pandas gives a missing pc or line as NaN where CSV gives null
        row.update({k: None if row[k] != row[k] else int(row[k]) for k in ("ptx_line", "pc") if row[k] is not None})
    assert rows == single


def test_a_named_level_reaches_every_worker(tmp_path):
    path, kernel, options = CASES["row4_loads"]
    single = counted(cli_rows(path, "-k", kernel, *options, "--level", "ptx"))
    rows = cli_rows(path, "-k", kernel, *options, "--level", "ptx", "--workers", 1)
    assert counted(rows) == single
    assert {row["text"].split()[0] for row in single} >= {"ld.shared.f32"}


def test_api_defaults_are_the_cli_defaults():
    api = inspect.signature(traceconf.analyze_ptx).parameters
    cli = inspect.signature(analyze_command.analyze).parameters
    assert api["level"].default == cli["level"].default == DEFAULT_LEVEL
    assert api["devices"].default == (DEFAULT_DEVICE,) and cli["device"].default is None   # None: DEFAULT_DEVICE
    sass = inspect.signature(traceconf.analyze_sass).parameters       # SASS input has no level to choose
    assert {"data", "seed"} <= set(api) & set(sass) and api["seed"].default == cli["seed"].default == 0


def test_the_api_takes_data_and_seed_as_the_cli_does():
    path = FIXTURES / "cuda" / "datadep.sm_90.ptx"
    kernel, options = "_Z7hist256PKhPji", ["--block", "256", "--param", "2=4096"]
    single = counted(cli_rows(path, "-k", kernel, *options, "--data", "0=random:uint8:4096", "--seed", "7"))
    frame = traceconf.analyze_ptx(path, kernel=kernel, block=256, params={2: 4096},
                                  data={0: "random:uint8:4096"}, seed=7)
    rows = counted(pa.Table.from_pandas(frame, preserve_index=False))
    assert [row["wavefronts"] for row in rows] == [row["wavefronts"] for row in single]
    assert all(frame.resolved)


def test_a_data_file_is_read_once_per_run(monkeypatch, tmp_path):
    """Several warp sizes and the launch facts share one read of each --data source."""
    import numpy as np

    from traceconf.emulate import data

    calls = []
    real = data.load_source
    monkeypatch.setattr(data, "load_source", lambda *args: calls.append(args) or real(*args))
    keys = tmp_path / "keys.npy"
    np.save(keys, np.arange(4096, dtype=np.uint8))
    frame = traceconf.analyze_ptx(FIXTURES / "cuda" / "datadep.sm_90.ptx", kernel="_Z7hist256PKhPji", block=256,
                                  params={2: 4096}, data={0: str(keys)}, devices=["sm_90", "cdna3"], level="ptx")
    assert set(frame.device) == {"sm_90", "cdna3"}
    assert len(calls) == 1


@pytest.mark.parametrize("source", [FIXTURES / "emulate" / "transpose.ptx",
                                    FIXTURES.parent / "data" / "hw" / "sass" / "transpose.sass"],
                         ids=["ptx", "sass listing"])
def test_a_launch_file_selects_the_kernels_of_any_program(source, tmp_path):
    """The kernels a launch file names are the ones analysed, whatever the program (a SASS listing analysed
    every kernel before the two levels shared one path)."""
    names = {"transpose.ptx": ("transpose_padded", "transpose_unpadded"),
             "transpose.sass": ("_Z14transpose_tileILi1EEvPfPKfi", "_Z14transpose_tileILi0EEvPfPKfi")}
    chosen, other = names[source.name]
    launches = tmp_path / "launches.toml"
    launches.write_text(f'[[launch]]\nkernel = "{chosen}"\nblock = [32, 8]\ngrid = [2, 2]\n')
    rows = cli_rows(source, "--launches", launches)
    assert set(rows.column("kernel").to_pylist()) == {chosen}
    assert other not in set(cli_rows(source, "--launches", launches, "-k", chosen).column("kernel").to_pylist())
