"""Meta's tritonparse structured logs as the launch records of a harvest.

A run that calls ``tritonparse.structured_logging.init(FOLDER, enable_trace_launch=True)`` writes NDJSON
files into FOLDER, one event per line, ``event_type`` naming it.  ``compilation`` events carry a kernel's
metadata and IR; a ``launch`` event carries

* ``compilation_metadata``: the launched kernel's compiled metadata (``hash``: the Triton cache's kernel
  hash, ``name``, ``num_warps`` ...);
* ``grid``: 1 to 3 numbers;
* ``extracted_args``: every argument by name, constexprs included — a tensor as ``{"type": "tensor",
  "dtype": "torch.float32", "shape": [...], ...}``, a number as ``{"type": "int", "value": 900}``.  (For
  Inductor's launchers, which pass the non-constant arguments, tritonparse pairs them with the kernel's
  argument names in order; Inductor puts its constexprs last, so the names hold.)

The PTX parameters are the arguments Triton did not fold into constants.  The log names arguments, not
parameters; the kernel's Triton IR in the cache (``NAME.source`` or ``NAME.ttir``: ``tt.func public
@NAME(%x_ptr: !tt.ptr<f32>, %n: i32 ...)``) lists the parameters by name and type.  :func:`read_events`
turns each launch event into a record holding its arguments by name; :func:`resolved` gives it the
``params`` of :func:`traceconf.triton.record_launches`' records once the kernel is known.

Files: plain ``.ndjson``, or tritonparse's ``.bin.ndjson`` of gzip members or zstd frames
(``compression="gzip"`` / ``"zstd"``); a folder is every such file in it, in name order.  Its CLP logs
(``.clp``) are not read.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path
from typing import Iterator

import zstandard

from traceconf.errors import InputError, data_errors
from traceconf.traces.source import GZIP_MAGIC

_ZSTD = b"\x28\xb5\x2f\xfd"
_FUNCTION = re.compile(r"tt\.func public @[\w$.]+\((.*)$", re.M)
_PARAMETER = re.compile(r"%([\w$.]+): (!tt\.ptr<([\w]+)>|[a-z]\w*)")


def is_structured_log(path: Path) -> bool:
    """Whether ``path`` is a tritonparse log (a folder of them, or a file whose first event has an
    ``event_type``) rather than record_launches' JSON lines."""
    if path.is_dir():
        return True
    try:
        with path.open("rb") as head:
            magic = head.read(4)
    except OSError:
        return False                     # the record reader says why it cannot be read
    # record_launches writes plain text: a compressed file is tritonparse's
    if magic.startswith(GZIP_MAGIC) or magic == _ZSTD:
        return True
    for _, _, event in _events_of(path):
        return "event_type" in event
    return False


def log_files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(".ndjson"))
    if not found:
        clp = " (its .clp logs are not read: log with compression 'none', 'gzip' or 'zstd')" \
            if any(path.glob("*.clp")) else ""
        raise InputError(f"no tritonparse log (.ndjson) in this folder{clp}", file=str(path))
    return found


def _text(path: Path) -> io.TextIOBase:
    raw = path.open("rb")
    magic = raw.read(4)
    raw.seek(0)
    if magic.startswith(GZIP_MAGIC):
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8")
    if magic == _ZSTD:
        with raw:
            return io.StringIO(_zstd_frames(raw.read()).decode("utf-8"))
    return io.TextIOWrapper(raw, encoding="utf-8")


def _zstd_frames(data: bytes) -> bytes:
    """The concatenated zstd frames' contents; a truncated frame is an error (zstandard's stream reader would
    end quietly)."""
    out = []
    while data:
        frame = zstandard.ZstdDecompressor().decompressobj()
        out.append(frame.decompress(data))
        if not frame.eof:
            raise ValueError("truncated zstd frame")
        data = frame.unused_data
    return b"".join(out)


def _events_of(path: Path) -> Iterator[tuple[str, int, dict]]:
    """(file, line, event) of every JSON line of one file."""
    try:
        with _text(path) as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except ValueError as error:
                    raise InputError(f"not a JSON line ({error})", file=str(path), line=number) from None
                if not isinstance(event, dict):
                    raise InputError("not a JSON object", file=str(path), line=number)
                yield str(path), number, event
    except InputError:
        raise
    except data_errors() as error:          # a damaged or truncated compressed log
        raise InputError(f"cannot read the log: {error}", file=str(path)) from None


def read_events(path: Path) -> list[dict]:
    """The launch events of a tritonparse log (file or folder) as records naming their arguments."""
    records = []
    for file in log_files(path):
        for name, number, event in _events_of(file):
            if event.get("event_type") == "launch":
                records.append(_launch(event, name, number))
    return records


def _launch(event: dict, file: str, line: int) -> dict:
    try:
        metadata, grid, arguments = event["compilation_metadata"], event["grid"], event["extracted_args"]
        dims = [int(d) for d in grid]
        if not (isinstance(metadata.get("hash"), str) and 1 <= len(dims) <= 3 and isinstance(arguments, dict)):
            raise ValueError
    except (KeyError, TypeError, ValueError, AttributeError):
        raise InputError("tritonparse launch event without compilation_metadata.hash, grid (1 to 3 numbers) and "
                         "extracted_args (was it logged with enable_trace_launch=True?)", file=file, line=line) \
            from None
    record = {"hash": metadata["hash"], "kernel": metadata.get("name") or event.get("name", ""),
              "grid": dims + [1] * (3 - len(dims)), "num_warps": metadata.get("num_warps"),
              "arguments": arguments, "at": (file, line)}
    if set(arguments) == {"_note"}:      # tritonparse skips the arguments inside a CUDA graph capture
        record["unrecorded"] = str(arguments["_note"])
    return record


def kernel_parameters(ir: str) -> list[tuple[str, str]]:
    """(name, Triton type) of each parameter of a kernel's Triton IR (``*fp32`` for ``!tt.ptr<f32>``, ``i32`` ...)."""
    found = _FUNCTION.search(ir)
    if not found:
        return []
    return [(name, "*" + _scalar(pointee) if pointee else _scalar(kind))
            for name, kind, pointee in _PARAMETER.findall(found.group(1))]


def _scalar(mlir: str) -> str:
    """MLIR's element type in Triton's spelling: f32 → fp32, bf16 and i32 as they are."""
    return "fp" + mlir[1:] if re.fullmatch(r"f\d+", mlir) else mlir


def resolved(record: dict, parameters: list[tuple[str, str]]) -> dict:
    """A launch event's record with ``params`` (record_launches' form) for the kernel's ``parameters``."""
    file, line = record["at"]
    params = []
    for name, kind in parameters:
        argument = record["arguments"].get(name)
        if not isinstance(argument, dict):
            raise InputError(f"launch of {record['kernel']}: no argument {name!r} (the kernel's parameters: "
                             f"{', '.join(n for n, _ in parameters)})", file=file, line=line)
        if kind.startswith("*"):
            if argument.get("type") != "tensor":
                raise InputError(f"launch of {record['kernel']}: argument {name!r} is a pointer, the log has "
                                 f"{argument.get('type')!r}", file=file, line=line)
            params.append({"type": kind, "dtype": str(argument.get("dtype", "")).removeprefix("torch."),
                           "shape": list(argument.get("shape") or [])})
        else:
            params.append({"type": kind, "value": argument.get("value")})
    return {"hash": record["hash"], "kernel": record["kernel"], "grid": record["grid"],
            "num_warps": record["num_warps"], "params": params}
