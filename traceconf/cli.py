"""Command-line entry point: wires the stages together, nothing else.

Each sub-command lives in :mod:`traceconf.commands` and registers itself on the
Typer app; this module only adds ``--version`` and turns
:class:`traceconf.errors.InputError` into a one-line message with exit code 2.
"""

from __future__ import annotations

import importlib
import sys

import typer

from traceconf import __version__
from traceconf.commands.analyze import report_input_error
from traceconf.errors import InputError

#: Sub-command modules, each exposing ``register(app)``.
COMMAND_MODULES = (
    "analyze",
    "explain",
    "compare_ncu",
    "compare_gpgpusim",
    "devices",
    "convert",
    "parse",
    "schema",
)

app = typer.Typer(
    name="traceconf",
    help="Find where GPU kernels lose time to shared-memory bank conflicts — from PTX or traces, no GPU needed.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"traceconf {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """traceconf: shared-memory bank-conflict analysis."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"traceconf.commands.{_name}").register(app)


def main() -> None:
    try:
        app()
    except InputError as error:
        report_input_error(error)
        sys.exit(2)
