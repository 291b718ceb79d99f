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

from traceconf.errors import InputError


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same file (links and ``..`` included); a missing path is compared by name."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def check_not_input(output: str | Path, inputs: Iterable[str | Path]) -> None:
    """Refuse an output path that is one of the inputs (writing it would destroy what is being read)."""
    for source in inputs:
        if source is not None and same_file(output, source):
            raise InputError(f"the output is the input file {source}: choose another output path", file=str(output))


def check_results_folder(output: str | Path, inputs: Iterable[str | Path]) -> None:
    """Refuse a results folder that is an input folder or lies inside one: its files would be read back as
    part of that input (a canonical Parquet dataset would take the results for accesses)."""
    target = Path(output).resolve()
    for source in inputs:
        folder = Path(source)
        if folder.is_dir() and (target == folder.resolve() or folder.resolve() in target.parents):
            raise InputError(f"the results folder is inside the input folder {source}: choose a folder outside it",
                             file=str(output))


def check_writable(output: str | Path) -> None:
    """Refuse, before any work, an output whose folder is missing or not writable, or that is a folder."""
    path = Path(output)
    if path.is_dir():
        raise InputError("the output is a folder: name a file", file=str(path))
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"cannot write: no such folder {folder}", file=str(path))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"cannot write: folder {folder} is not writable", file=str(path))


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
