"""Every file traceconf writes is written atomically, and never over one of its own inputs.

A writer gets a temporary path beside the target (same folder, so the final
rename is atomic on one file system); when the writer finishes, the file is
flushed to disk (fsync) and renamed over the target.  A run that fails or is
killed mid-way leaves the previous target untouched (and at worst a hidden
``.NAME.*.tmp`` beside it); a reader never sees a half-written Parquet file
without its footer.

>>> with atomic_output("results.parquet", inputs=["trace.parquet"]) as temporary:
...     pq.write_table(table, temporary)
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from traceconf.errors import InputError, data_error_message


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same file (links and ``..`` included); a missing path is compared by name."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def _inside(path: Path, folder: Path) -> bool:
    return folder in path.parents or path == folder


def check_not_input(output: str | Path, inputs: Iterable[str | Path]) -> None:
    """Refuse an output path that is one of the inputs (writing it would destroy what is being read), or a
    Parquet file inside an input folder (every later run over that folder would read it back as input)."""
    target = Path(output).resolve()
    for source in inputs:
        if source is None:
            continue
        if same_file(output, source):
            raise InputError(f"the output is the input file {source}: choose another output path", file=str(output))
        folder = Path(source)
        if target.suffix.lower() == ".parquet" and folder.is_dir() and _inside(target, folder.resolve()):
            raise InputError(f"the results file is inside the input folder {source}, which would read it back as "
                             "input: choose a path outside it", file=str(output))


def check_results_folder(output: str | Path, inputs: Iterable[str | Path]) -> None:
    """Refuse, before any work, a results folder that is an input folder or lies inside one (its files would
    be read back as part of that input: a canonical Parquet dataset would take the results for accesses), or
    that cannot be made or written (under a file, on a read-only file system, in /proc)."""
    target = Path(output).resolve()
    for source in inputs:
        folder = Path(source)
        if folder.is_dir() and _inside(target, folder.resolve()):
            raise InputError(f"the results folder is inside the input folder {source}: choose a folder outside it",
                             file=str(output))
    check_folder_writable(output)


def check_folder_writable(output: str | Path, named: str | Path | None = None) -> None:
    """Whether the folder ``output`` exists and takes new files, or can be made: tried, not guessed from
    permission bits (root passes every access() test, yet cannot write a read-only mount or /proc).  The
    probe is a temporary file (or, where the folder is still to be made, a temporary folder beside it) that
    is removed at once, so nothing is left behind.  Errors name ``named`` (the user's output), else ``output``."""
    path = Path(output)
    shown = str(named if named is not None else output)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise InputError(f"cannot make the results folder: {existing} is not a folder", file=shown)
    try:
        if existing == path:
            descriptor, probe = tempfile.mkstemp(prefix=".traceconf-probe.", dir=path)
            os.close(descriptor)
            os.unlink(probe)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".traceconf-probe.", dir=existing))
    except OSError as error:
        raise InputError(f"cannot write: {error.strerror or error} in {existing}", file=shown) from None


def check_writable(output: str | Path) -> None:
    """Refuse, before any work, an output whose folder is missing or not writable, that is a folder, or that
    exists as anything but a regular file (a device node, a FIFO, a socket: renaming over it would replace
    it, and as root that reaches /dev)."""
    path = Path(output)
    if path.is_dir():
        raise InputError("the output is a folder: name a file", file=str(path))
    if path.exists() and not path.is_file():
        raise InputError("the output exists and is not a regular file (a device, FIFO or socket): name a "
                         "regular file", file=str(path))
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"cannot write: no such folder {folder}", file=str(path))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"cannot write: folder {folder} is not writable", file=str(path))
    check_folder_writable(folder, named=path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_folder(folder: Path) -> None:
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:          # some file systems do not open folders; the rename is still atomic
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


@contextmanager
def atomic_output(output: str | Path, inputs: Iterable[str | Path] = ()) -> Iterator[Path]:
    """A temporary path beside ``output``; on normal exit it is fsynced and renamed over ``output``, on an
    exception (or KeyboardInterrupt) removed, leaving ``output`` as it was.  OS errors become InputErrors."""
    target = Path(output)
    check_not_input(target, inputs)
    check_writable(target)
    try:
        descriptor, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    except OSError as error:
        raise InputError(f"cannot write: {error.strerror or error}", file=str(target)) from None
    os.close(descriptor)
    temporary = Path(name)
    try:
        yield temporary
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())
        os.chmod(temporary, 0o666 & ~_umask())      # mkstemp makes it private; a result file is not
        os.replace(temporary, target)
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise InputError(f"cannot write: {error.strerror or error}", file=str(target)) from None
        raise
    _fsync_folder(target.parent if str(target.parent) else Path("."))


def write_text(output: str | Path, text: str, inputs: Iterable[str | Path] = ()) -> None:
    """``text`` (UTF-8) as the whole content of ``output``, atomically."""
    with atomic_output(output, inputs) as temporary:
        temporary.write_text(text, encoding="utf-8")


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes (what a manifest records of each partition it lists)."""
    import hashlib
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def partition_intact(path: str | Path, rows: int, digest: str) -> bool:
    """Whether a Parquet file written earlier is whole and unchanged: its footer reads, it holds ``rows`` rows
    and its bytes hash to ``digest``, as the manifest recorded them (a file cut short by a full disk loses
    its footer; a flipped bit inside a page keeps footer and row count, not the digest)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        metadata = pq.ParquetFile(path).metadata
        return metadata.num_rows == rows and file_digest(path) == digest
    except (OSError, ValueError, pa.ArrowException):    # a damaged footer raises any of these
        return False


def read_manifest(path: str | Path, fields: dict[str, type], records: str | None = None,
                  record_fields: dict[str, type] | None = None) -> dict | None:
    """A results folder's manifest (JSON) whose top-level ``fields`` have the given types, and whose list
    ``records`` holds objects with ``record_fields``; None where there is none.  Anything else there (not
    JSON, JSON of another shape) is a located InputError, never a KeyError deep in a resumed run."""
    import json
    manifest = Path(path)
    if manifest.exists() and not manifest.is_file():
        raise InputError("not a traceconf results manifest (not a regular file): remove it to start afresh",
                         file=str(manifest))
    if not manifest.is_file():
        return None
    try:
        body = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, ValueError, RecursionError) as error:
        raise InputError(f"not a traceconf results manifest ({data_error_message(error)}): remove it to start "
                         "afresh", file=str(manifest)) from None

    def wrong(value, expected: dict[str, type]) -> list[str]:
        return [name for name, kind in expected.items() if not isinstance(value, dict)
                or not isinstance(value.get(name), kind)]

    missing = wrong(body, fields)
    if not missing and records is not None:
        listed = body.get(records)
        missing = [records] if not isinstance(listed, list) else \
            [f"{records}[{i}].{name}" for i, record in enumerate(listed) for name in wrong(record, record_fields or {})]
    if missing:
        raise InputError(f"not a traceconf results manifest ({missing[0]} is missing or of another type): remove it "
                         "to start afresh", file=str(manifest))
    return body


def end_by_closed_pipe() -> None:
    """The reader of stdout closed the pipe (``traceconf analyze ... | head``): end as every Unix tool does, by
    SIGPIPE, never with exit status 1, the --fail-on-excess gate's; nothing more is written (the Python docs'
    "Note on SIGPIPE": stdout goes to devnull first)."""
    import signal
    import sys

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):        # no real stdout (captured): nothing to silence
        pass
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    raise SystemExit(1)
