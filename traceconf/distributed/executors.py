"""Where tasks run: this process, a local process pool, or Dask; each yields (unit, UnitResult or the reason
the unit was lost).  Nothing here schedules work: the executor does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from traceconf.cluster import check_scheduler_address, connect
from traceconf.distributed.task import UnitResult, analyze_unit
from traceconf.distributed.units import Unit, digest
from traceconf.errors import InputError


@dataclass
class Executor:
    """Where tasks run: ``local`` (this process), ``processes`` (a local pool of ``workers``), or
    ``dask`` (a new LocalCluster of ``workers`` processes, or the cluster at ``scheduler``)."""

    kind: str = "local"
    workers: int = 1
    scheduler: str | None = None
    notes: list[str] = field(default_factory=list)


def choose_executor(workers: int | None, scheduler: str | None) -> Executor:
    """Dask when asked for and installed; ``--workers`` without Dask falls back to a process pool."""
    if scheduler is not None:
        if not dask_available():
            raise InputError("--scheduler needs Dask: pip install 'traceconf[distributed]'")
        return Executor("dask", workers or 0, check_scheduler_address(scheduler))
    if workers is None:
        return Executor("local")
    if workers < 1:
        raise InputError(f"--workers: expected at least 1, got {workers}")
    if dask_available():
        return Executor("dask", workers)
    return Executor("processes", workers, notes=[
        "dask[distributed] is not installed: --workers runs a local process pool "
        "(pip install 'traceconf[distributed]' for Dask)"])


def dask_available() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def _run_local(units, args) -> Iterator[tuple[Unit, UnitResult | str]]:
    for unit in units:
        yield unit, analyze_unit(unit, *args, keep_accesses=True)


def _run_processes(units, args, workers: int) -> Iterator[tuple[Unit, UnitResult | str]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(analyze_unit, unit, *args): unit for unit in units}
        for future in as_completed(futures):
            unit = futures[future]
            try:
                yield unit, future.result()
            except BrokenProcessPool:
                yield unit, "a worker process died (killed, or out of memory) before this unit finished"
            except Exception as error:  # pickling or transport of the result
                yield unit, f"the worker could not return this unit: {type(error).__name__}: {error}"


#: Dask's default worker environment sets MALLOC_TRIM_THRESHOLD_=65536, which also switches off glibc's
#: adaptive mmap threshold: every large array of a trace block is then mmapped and unmapped afresh, and a
#: worker reads traces 1.5x slower than a plain process (measured).  ``None`` leaves it unset.
WORKER_ENVIRON = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


def local_cluster(workers: int):
    """A Dask LocalCluster of ``workers`` single-threaded processes (the reader holds the GIL), quiet."""
    import logging

    import dask
    from distributed import LocalCluster

    with dask.config.set(WORKER_ENVIRON):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                            silence_logs=logging.ERROR)


def _run_dask(units, args, executor: Executor) -> Iterator[tuple[Unit, UnitResult | str]]:
    from distributed import Client, as_completed

    cluster = None
    if executor.scheduler is not None:
        client = connect(executor.scheduler)
    else:
        cluster = local_cluster(executor.workers)
        client = Client(cluster)
    try:
        futures = client.map(analyze_unit, units, *[[a] * len(units) for a in args], pure=False,
                             key=[f"traceconf-unit-{i}-{digest(u.key)}" for i, u in enumerate(units)])
        unit_of = {f.key: u for f, u in zip(futures, units)}
        for future in as_completed(futures):
            unit = unit_of[future.key]
            try:
                yield unit, future.result()
            except Exception as error:  # KilledWorker after the allowed retries, or a transport error
                yield unit, f"the Dask task failed ({type(error).__name__}: {error})"
            future.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def execute(units: list[Unit], args: tuple, executor: Executor) -> Iterator[tuple[Unit, UnitResult | str]]:
    if not units:
        return iter(())
    if executor.kind == "dask":
        return _run_dask(units, args, executor)
    if executor.kind == "processes":
        return _run_processes(units, args, executor.workers)
    return _run_local(units, args)
