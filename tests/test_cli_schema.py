"""``traceconf schema``: every pipeline table, documented column by column."""

import pyarrow as pa
from typer.testing import CliRunner

from traceconf.cli import app
from traceconf.schemas import TABLES


def run(*args):
    return CliRunner().invoke(app, ["schema", *args])


def test_lists_every_table():
    result = run()
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.stdout.splitlines()] == list(TABLES)


def test_one_table_is_a_markdown_table_with_every_column_documented():
    result = run("accesses")
    assert result.exit_code == 0
    rows = result.stdout.splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == TABLES["accesses"].names
    assert all(row.rstrip(" |").split("|")[-1].strip() for row in rows)


def test_every_column_of_every_table_has_a_meaning():
    for name, schema in TABLES.items():
        assert isinstance(schema, pa.Schema)
        undocumented = [f.name for f in schema if not (f.metadata or {}).get(b"doc")]
        assert undocumented == [], name


def test_unknown_table_did_you_mean():
    result = run("acesses")
    assert result.exit_code == 2
    assert "no table matches 'acesses'; did you mean 'accesses'?" in result.stderr
