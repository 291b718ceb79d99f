"""Command-line entry point: wires the stages together, nothing else.

Each sub-command lives in :mod:`traceconf.commands` and registers itself on the
Typer app; this module only adds ``--version``/``--debug`` and is the last
boundary: :class:`traceconf.errors.InputError` becomes a one-line message with
exit status 2; anything else is a bug of ours and becomes one line "internal
error ... please report" with exit status 70 (the traceback only under
``--debug`` or ``TRACECONF_DEBUG=1``).
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

from traceconf import __version__

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

EPILOG = ("Exit status: 0 ok, 1 --fail-on-excess exceeded, 2 bad input, 3 --fail-on-excess unverifiable "
          "(unresolved accesses), 70 internal error (please report).")


def debugging() -> bool:
    return os.environ.get("TRACECONF_DEBUG", "") not in ("", "0")


@lru_cache(maxsize=None)
def build_app(only: str | None = None):
    """The Typer app with every sub-command registered (built on first use: ``--version`` needs none of it), or
    with the one named ``only`` (a module of :data:`COMMAND_MODULES`)."""
    import importlib

    import typer

    app = typer.Typer(
        name="traceconf",
        help="Find where GPU kernels lose time to shared-memory bank conflicts — from PTX or traces, no GPU "
             "needed.",
        epilog=EPILOG,
        no_args_is_help=True,
        add_completion=True,           # --install-completion / --show-completion for bash, zsh, fish, PowerShell
        pretty_exceptions_enable=False,
    )

    def version(value: bool) -> None:
        if value:
            typer.echo(f"traceconf {__version__}")
            raise typer.Exit()

    @app.callback()
    def _root(show_version: bool = typer.Option(False, "--version", callback=version, is_eager=True,
                                                help="Print the version and exit."),
              debug: bool = typer.Option(False, "--debug", help="Show the traceback of an internal error.")) -> None:
        """traceconf: shared-memory bank-conflict analysis.

        Exit status: see the app's epilog (docs/reports.md, "Exit status and errors").
        """
        if debug:
            os.environ["TRACECONF_DEBUG"] = "1"

    for name in COMMAND_MODULES if only is None else (only,):
        importlib.import_module(f"traceconf.commands.{name}").register(app)
    return app


def __getattr__(name: str):
    if name == "app":
        return build_app()
    raise AttributeError(f"module 'traceconf.cli' has no attribute {name!r}")


def named_command(arguments: list[str]) -> str | None:
    """The module of the sub-command a command line runs (the first word that is not an option: the app's own
    options take no value), or None (no such command: the whole app answers, with its list of commands)."""
    word = next((argument for argument in arguments if not argument.startswith("-")), "")
    module = word.replace("-", "_")
    return module if module in COMMAND_MODULES and "_" not in word else None


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        # the whole answer is the version: no CLI framework to load (start-up is what a version check waits for)
        sys.stdout.write(f"traceconf {__version__}\n")
        return
    from traceconf.startup import (fewer_collections, malloc_keeps_freed_memory, one_blas_thread,
                                   pyarrow_compute_without_option_docs, pyarrow_without_pandas)

    fewer_collections()                  # first: the imports below create most of start-up's objects
    one_blas_thread()                    # before numpy is imported
    pyarrow_without_pandas()
    pyarrow_compute_without_option_docs()
    malloc_keeps_freed_memory()
    from traceconf.commands.analyze import report_input_error
    from traceconf.errors import EXIT_INPUT, InputError

    try:
        # the app of the one command named: Typer turns the signature of every command registered into Click
        # options on every run; a test may put an app of its own in the module
        (vars(sys.modules[__name__]).get("app") or build_app(named_command(sys.argv[1:])))()
    except SystemExit as done:
        _closed_pipe(done)
        raise
    except InputError as error:
        report_input_error(error)
        sys.exit(EXIT_INPUT)
    except KeyboardInterrupt:
        sys.stderr.write("traceconf: interrupted\n")
        sys.exit(130)
    except Exception as error:   # the last boundary: a bug of ours, never a traceback unless asked for
        _internal(error)


def _closed_pipe(done: SystemExit) -> None:
    """`traceconf ... | head` on a typer.echo: the reader closed stdout, and Click exits 1 (the --fail-on-excess
    gate's status) after swapping in its PacifyFlushWrapper; end by SIGPIPE instead (the rich tables do so in
    their console).  The signal's default action is set only here: a Dask cluster's sockets keep EPIPE errors."""
    if done.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
        from traceconf.outputs import end_by_closed_pipe
        end_by_closed_pipe()


def _internal(error: BaseException) -> None:
    import traceback

    from traceconf.errors import EXIT_INTERNAL, internal_message

    if debugging():
        traceback.print_exception(error)
    sys.stderr.write(f"traceconf: {internal_message(error)}\n")
    sys.exit(EXIT_INTERNAL)
