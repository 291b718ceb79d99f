"""``traceconf schema``: the Arrow tables that flow between the stages, with each column's meaning."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from traceconf.errors import InputError
from traceconf.names import no_match_message


def schema(table: Annotated[Optional[str], typer.Argument(
        help="One table (e.g. accesses, result_rows); default: list the tables.")] = None) -> None:
    """Print the schema of a table (Markdown: column, Arrow type, meaning), or list the tables."""
    from traceconf.commands.analyze import fail
    from traceconf.schemas import TABLES, describe

    if table is None:
        for name, fields in TABLES.items():
            typer.echo(f"{name:20} {len(fields)} columns: {', '.join(fields.names)}")
        return
    key = table.lower().replace("-", "_")
    if key not in TABLES:
        raise fail(InputError(no_match_message(table, list(TABLES), "table")))
    typer.echo(describe(TABLES[key]))


def register(app: typer.Typer) -> None:
    app.command("schema")(schema)
