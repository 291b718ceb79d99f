"""What a Triton run leaves behind: the compiled kernels in Triton's cache, and the launches a hook records.

**Cache.** Triton writes every kernel it compiles to ``TRITON_CACHE_DIR``
(default ``~/.triton/cache``), one folder per compilation: ``NAME.cubin``,
``NAME.ptx`` and ``NAME.json`` (the metadata: ``name``, ``num_warps``,
``shared`` bytes, ``target``, ``hash``, ``triton_version`` ...).  Inductor
(``torch.compile``) compiles its Triton kernels through the same cache.

**Launches.** :func:`record_launches` appends one JSON line per kernel launch (tritonparse's launch events
are the other source: :mod:`traceconf.triton.structured_log`):
``{"hash", "kernel", "grid": [x, y, z], "num_warps", "params": [...]}``
with one entry per PTX parameter (the arguments Triton did not fold into
constants, in order): ``{"type": "*fp32", "dtype": "float32", "shape": [..]}``
for a pointer, ``{"type": "i32", "value": 1000}`` for a scalar.  The hook
wraps ``CompiledKernel.run``, the launcher through which every launch of a
``@triton.jit`` function and of Inductor's Triton launchers goes (Inductor's
static CUDA launcher bypasses it: docs/triton.md says how to switch it off).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from traceconf.errors import InputError


@dataclass
class CachedKernel:
    """One compiled kernel of a Triton cache directory."""

    name: str
    hash: str
    cubin: Path
    num_warps: int
    shared_bytes: int
    arch: str
    triton_version: str

    def parameters(self) -> list[tuple[str, str]]:
        """(name, Triton type) of each PTX parameter before the scratch pointers, from the kernel's Triton IR
        in the cache (``NAME.source``, else ``NAME.ttir``)."""
        from traceconf.triton.structured_log import kernel_parameters
        for suffix in (".source", ".ttir"):
            ir = self.cubin.with_suffix(suffix)
            if ir.exists():
                return kernel_parameters(ir.read_text(errors="replace"))
        raise InputError(f"no Triton IR ({self.name}.source or .ttir) beside the cubin: the arguments a "
                         "tritonparse log names cannot be matched to the kernel's parameters", file=str(self.cubin))


def cache_dir(path: str | Path | None = None) -> Path:
    """The cache to read: ``path``, else ``TRITON_CACHE_DIR``, else ``~/.triton/cache``."""
    import os
    return Path(path or os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache").expanduser()


def read_cache(path: str | Path) -> list[CachedKernel]:
    """Every kernel of the cache that has a cubin (NVIDIA) and its metadata, in a stable order."""
    root = Path(path)
    if not root.is_dir():
        raise InputError("not a Triton cache directory (no such folder)", file=str(root))
    found = []
    for meta_path in sorted(root.glob("*/*.json")):
        cubin = meta_path.with_suffix(".cubin")
        if meta_path.name.startswith("__grp__") or not cubin.exists():
            continue
        try:
            meta = json.loads(meta_path.read_text())
            target = meta.get("target") or {}
            found.append(CachedKernel(name=meta["name"], hash=meta["hash"], cubin=cubin,
                                      num_warps=int(meta["num_warps"]), shared_bytes=int(meta.get("shared") or 0),
                                      arch=f"sm_{target.get('arch', 90)}",
                                      triton_version=str(meta.get("triton_version") or "")))
        except (ValueError, KeyError, TypeError) as error:
            raise InputError(f"unreadable Triton metadata ({error!r})", file=str(meta_path)) from None
    return found


def read_launches(path: str | Path) -> list[dict]:
    """The JSON lines :func:`record_launches` wrote, or the launch events of a tritonparse log (a file or its
    folder: :mod:`traceconf.triton.structured_log`); bad lines are errors naming file and line."""
    from traceconf.triton import structured_log

    path = Path(path)
    if path.exists() and structured_log.is_structured_log(path):
        return structured_log.read_events(path)
    records = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as error:
        raise InputError(f"cannot read launch records: {error.strerror}", file=str(path)) from None
    except UnicodeError:
        raise InputError("not launch records (not UTF-8 text)", file=str(path)) from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not (isinstance(record.get("hash"), str) and len(record["grid"]) == 3
                    and isinstance(record["params"], list)):
                raise ValueError("expected hash, grid [x, y, z] and params")
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise InputError(f"bad launch record: {error}", file=str(path), line=number) from None
        records.append(record)
    return records


def _describe(value, kind: str) -> dict:
    if kind.startswith("*"):
        return {"type": kind, "dtype": str(getattr(value, "dtype", "")).removeprefix("torch."),
                "shape": [int(n) for n in getattr(value, "shape", ())]}
    if isinstance(value, (bool, int, float)):
        return {"type": kind, "value": value}
    return {"type": kind, "value": None}


def launch_record(kernel, grid, args: tuple) -> dict:
    """The JSON record of one launch of a CompiledKernel (see the module docstring)."""
    signature = dict(getattr(getattr(kernel, "src", None), "signature", None) or {})
    kinds = list(signature.values())
    if len(args) == len(kinds):         # @triton.jit launches pass every argument, constants included
        pairs = [(value, kind) for value, kind in zip(args, kinds) if kind != "constexpr"]
    else:                               # Inductor's launchers pass the non-constant ones
        pairs = list(zip(args, [kind for kind in kinds if kind != "constexpr"]))
    dims = [int(d) for d in grid] + [1] * (3 - len(grid))
    return {"hash": kernel.metadata.hash, "kernel": kernel.metadata.name, "grid": dims,
            "num_warps": kernel.metadata.num_warps, "params": [_describe(v, k) for v, k in pairs]}


def record_launches(path: str | Path) -> Callable[[], None]:
    """Append a JSON line per Triton kernel launch of this process to ``path`` (call once, before the run);
    returns the function that stops recording."""
    from triton.compiler.compiler import CompiledKernel

    target = Path(path)
    launcher = CompiledKernel.run          # a property: the compiled launcher, loaded on first use

    def recording(kernel):
        def run(grid_0, grid_1, grid_2, stream, function, packed, metadata, enter, exit_, *args):
            with target.open("a") as out:
                out.write(json.dumps(launch_record(kernel, (grid_0, grid_1, grid_2), args)) + "\n")
            return launcher.fget(kernel)(grid_0, grid_1, grid_2, stream, function, packed, metadata, enter,
                                         exit_, *args)
        return run

    CompiledKernel.run = property(recording)

    def stop() -> None:
        CompiledKernel.run = launcher
    return stop
