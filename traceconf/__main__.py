"""``python -m traceconf`` is the ``traceconf`` command."""

from traceconf.cli import main

main()
