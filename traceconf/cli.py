"""Command-line entry point: wires the stages together, nothing else.

Each sub-command lives in :mod:`traceconf.commands` and registers itself on the
Typer app; this module only adds ``--version``/``--debug`` and is the last
boundary: :class:`traceconf.errors.InputError` becomes a one-line message with
exit status 2; anything else is a bug of ours and becomes one line "internal
error ... please report" with exit status 70 (the traceback only under
``--debug`` or ``TRACECONF_DEBUG=1``).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback

import typer

from traceconf import __version__
from traceconf.commands.analyze import report_input_error
from traceconf.errors import EXIT_INPUT, EXIT_INTERNAL, InputError, internal_message

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
    "harvest",
    "triton",
)

app = typer.Typer(
    name="traceconf",
    help="Find where GPU kernels lose time to shared-memory bank conflicts — from PTX or traces, no GPU needed.",
    epilog="Exit status: 0 ok, 1 --fail-on-excess exceeded, 2 bad input, 3 --fail-on-excess unverifiable "
           "(unresolved accesses), 70 internal error (please report).",
    no_args_is_help=True,
    add_completion=True,           # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"traceconf {__version__}")
        raise typer.Exit()


def debugging() -> bool:
    return os.environ.get("TRACECONF_DEBUG", "") not in ("", "0")


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit."),
          debug: bool = typer.Option(False, "--debug", help="Show the traceback of an internal error.")) -> None:
    """traceconf: shared-memory bank-conflict analysis.

    Exit status: see the app's epilog (docs/reports.md, "Exit status and errors").
    """
    if debug:
        os.environ["TRACECONF_DEBUG"] = "1"


for _name in COMMAND_MODULES:
    importlib.import_module(f"traceconf.commands.{_name}").register(app)


def main() -> None:
    try:
        app()
    except InputError as error:
        report_input_error(error)
        sys.exit(EXIT_INPUT)
    except KeyboardInterrupt:
        sys.stderr.write("traceconf: interrupted\n")
        sys.exit(130)
    except Exception as error:   # the last boundary: a bug of ours, never a traceback unless asked for
        _internal(error)


def _internal(error: BaseException) -> None:
    if debugging():
        traceback.print_exception(error)
    sys.stderr.write(f"traceconf: {internal_message(error)}\n")
    sys.exit(EXIT_INTERNAL)
