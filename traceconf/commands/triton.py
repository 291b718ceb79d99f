"""``traceconf triton FILE.py``: one launch of a ``@triton.jit`` kernel of a Python file, from the command line.

The launch is written as Triton's would be: ``--grid``, then one ``--arg`` per argument in order
(``f32[1823,781]`` for an array of that element type and shape, whose contents are unknown; ``781``,
``0x10``, ``1e-5``, ``True`` for scalars) and ``--arg NAME=VALUE`` for keyword arguments (constexprs).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from traceconf.errors import InputError
from traceconf.rules import DEFAULT_DEVICE

#: Element types an array argument may name: numpy's names and the short ones (f32, bf16, i32, u8 ...).
SHORT_DTYPES = {"f16": "float16", "fp16": "float16", "bf16": "bfloat16", "f32": "float32", "fp32": "float32",
                "f64": "float64", "fp64": "float64", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
                "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "i1": "bool"}
NUMPY_DTYPES = set(SHORT_DTYPES.values())
_ARRAY = re.compile(r"^(?P<dtype>\w+)\[(?P<shape>[\d,x× ]*)\]$")


def parse_value(text: str, option: str):
    """An ``--arg`` value: an array spec, an integer, a float or a bool."""
    from traceconf.triton.compile import ArraySpec

    text = text.strip()
    array = _ARRAY.match(text)
    if array:
        dtype = SHORT_DTYPES.get(array.group("dtype").lower(), array.group("dtype").lower())
        if dtype not in NUMPY_DTYPES:
            raise InputError(f"{option}: unknown element type {array.group('dtype')!r} (use one of "
                             f"{', '.join(sorted(SHORT_DTYPES))} or their numpy names)")
        dims = [d for d in re.split(r"[,x× ]+", array.group("shape")) if d]
        return ArraySpec(dtype, tuple(int(d) for d in dims))
    if text in ("True", "False"):
        return text == "True"
    for kind in (lambda t: int(t, 0), float):
        try:
            return kind(text.replace("_", ""))
        except ValueError:
            continue
    raise InputError(f"{option}: expected an array DTYPE[SHAPE] (f32[1024,1024]), a number or True/False, "
                     f"got {text!r}")


def parse_args(items: list[str]) -> tuple[list, dict]:
    positional, named = [], {}
    for number, item in enumerate(items, 1):
        name, sep, value = item.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_]\w*", name.strip()):
            named[name.strip()] = parse_value(value, f"--arg {name.strip()}")
        elif named:
            raise InputError(f"--arg {item!r}: positional arguments come before NAME=VALUE ones")
        else:
            positional.append(parse_value(item, f"--arg #{number}"))
    return positional, named


def load_kernel(path: Path, name: str):
    """The ``@triton.jit`` function ``name`` of the Python file (the file runs, as an import would)."""
    import importlib.util
    import sys

    from traceconf.names import no_match_message

    if not path.is_file():
        raise InputError("no such file", file=str(path))
    spec = importlib.util.spec_from_file_location(f"traceconf_kernels_{abs(hash(str(path.resolve())))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module            # Triton's source lookup and dataclasses need the module registered
    try:
        spec.loader.exec_module(module)
    except Exception as error:                 # the user's file failed to import: their error, said in one line
        raise InputError(f"importing the file failed: {type(error).__name__}: {error}", file=str(path)) from None
    kernels = [key for key, value in vars(module).items() if type(value).__module__.startswith("triton.runtime")]
    if name not in kernels:
        raise InputError(no_match_message(name, kernels), file=str(path))
    return getattr(module, name)


def triton(
    file: Annotated[Path, typer.Argument(help="Python file defining the kernel.")],
    kernel: Annotated[str, typer.Option("--kernel", "-k", help="Name of the @triton.jit function.")],
    grid: Annotated[str, typer.Option("--grid", help="Grid X[,Y[,Z]].")],
    arg: Annotated[Optional[list[str]], typer.Option(
        "--arg", help="One argument, in order: DTYPE[SHAPE] (f32[1024,1024]) for an array, a number or "
        "True/False; NAME=VALUE for a keyword (constexpr) argument.")] = None,
    num_warps: Annotated[int, typer.Option("--num-warps", min=1)] = 4,
    num_stages: Annotated[int, typer.Option("--num-stages", min=1)] = 3,
    device: Annotated[str, typer.Option("--device", "-d", help="Rule set (an NVIDIA architecture).")] = DEFAULT_DEVICE,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write every row (.parquet, .csv or .json).")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Hotspot rows shown.")] = 10,
    fail_on_excess: Annotated[Optional[int], typer.Option(
        "--fail-on-excess", min=0, help="Exit 1 when the excess wavefronts exceed N.")] = None,
) -> None:
    """Analyse one launch of a Triton kernel of a Python file (no GPU): per Python line."""
    from traceconf.commands.analyze import fail, parse_dims
    from traceconf.commands.harvest import write_rows
    from traceconf.report.notebook import hotspot_lines
    from traceconf.report.writers import check_output
    import traceconf.triton

    try:
        if output is not None:
            check_output(output, [file])
        dims = parse_dims(grid, "--grid")
        positional, named = parse_args(arg or [])
        function = load_kernel(file, kernel)
        # as in fn[grid](..., num_stages=4): one keyword is both the option and a constexpr of that name
        num_warps, num_stages = named.pop("num_warps", num_warps), named.pop("num_stages", num_stages)
        table = traceconf.triton.analyze(function, dims, *positional, num_warps=num_warps, num_stages=num_stages,
                                         device=device, **named)
        if output is not None:
            write_rows(table, output)
    except InputError as error:
        raise fail(error) from None
    facts = table.attrs["launch"]
    excess = int(table["excess_wavefronts"].sum()) if len(table) else 0
    typer.echo(f"{facts['kernel']}  grid {'×'.join(map(str, facts['grid']))}, {facts['num_warps']} warps, "
               f"{facts['shared_bytes']} B shared, Triton {facts['triton_version']}: wavefronts "
               f"{int(table['wavefronts'].sum()) if len(table) else 0:,}, excess {excess:,}")
    for line in hotspot_lines(table, top):
        typer.echo("  " + line.split(": ", 1)[1])
    if fail_on_excess is not None and excess > fail_on_excess:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("triton")(triton)
