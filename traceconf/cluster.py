"""How many workers a run may start, and reaching an existing Dask cluster: both checked before any work.

``--workers 1000`` on two units of work would start 998 idle processes of ~100 MB each; ``--scheduler ""``
(an unset variable in a job script) would wait forever on a cluster of no workers.  A run starts at most one
worker per unit and no more than the machine's available memory holds, and a cluster that has no worker
after a bounded wait is an error naming ``--scheduler``.
"""

from __future__ import annotations

from dataclasses import replace

from traceconf.errors import InputError, reading
from traceconf.machine import available_memory
from traceconf.numbers import check_int

#: Memory one worker process needs before it reads anything (interpreter, numpy, pyarrow, the rule sets:
#: ~100 MB measured), with room for the blocks it streams.
WORKER_BYTES = 256 << 20
#: How long a cluster may take to show its first worker (a job scheduler may still be starting them).
WORKER_WAIT_SECONDS = 60.0


def fit_workers(requested: int, units: int, memory: int | None = None) -> tuple[int, str | None]:
    """The workers to start for ``requested`` and ``units`` of work, and a note when that is fewer."""
    memory = available_memory() if memory is None else memory
    by_memory = max(1, memory // WORKER_BYTES)
    workers = max(1, min(requested, units, by_memory))
    if workers == requested:
        return workers, None
    reason = (f"there are {units} units of work" if workers == max(1, units) else
              f"the machine's available memory ({memory / 2**30:.1f} GiB) holds {by_memory} workers")
    return workers, f"--workers {requested}: starting {workers}, as {reason}"


def fitted(executor, units: int, notes: list[str]):
    """``executor`` with its local workers fitted to ``units`` (a note in ``notes`` when fewer); an existing
    cluster's workers are its own."""
    if executor.scheduler is not None or executor.kind == "local":
        return executor
    workers, note = fit_workers(executor.workers, units)
    if note:
        notes.append(note)
    return replace(executor, workers=workers)


def check_scheduler_address(address: str) -> str:
    """The address as given, refused at once when empty (an unset variable) or not an address Dask reads."""
    text = address.strip()
    if not text:
        raise InputError("the scheduler address is empty (an unset variable?): give tcp://HOST:PORT",
                         file="--scheduler")
    from distributed.comm import parse_address
    from distributed.comm.registry import backends

    refused = InputError(f"{text!r} is not a scheduler address: give tcp://HOST:PORT", file="--scheduler")
    try:
        scheme, location = parse_address(text)
    except (ValueError, TypeError):
        raise refused from None
    if scheme not in backends or not location:
        raise refused
    if scheme != "inproc":
        host, _, port = location.rpartition(":")
        if not host or not port.isdigit():
            raise refused
        check_int(int(port), "--scheduler", what="port", low=0, high=65535)
    return text


def connect(address: str, wait: float | None = None):
    """A Dask client of the cluster at ``address`` that has at least one worker, within ``wait`` seconds."""
    from distributed import Client

    wait = WORKER_WAIT_SECONDS if wait is None else wait
    with reading("--scheduler"):
        client = Client(check_scheduler_address(address), timeout=wait)
    try:
        client.wait_for_workers(1, timeout=wait)
    except (TimeoutError, OSError):
        client.close()
        raise InputError(f"the cluster at {address.strip()} has no workers after {wait:g} s", file="--scheduler") \
            from None
    return client
