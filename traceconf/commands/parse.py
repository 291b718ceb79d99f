"""``traceconf parse``: the kernels of a PTX file and their shared-memory instructions."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.compute as pc
import pyarrow.parquet as pq
import typer

from traceconf.errors import InputError
from traceconf.ptx import PtxModule, parse_file


class Format(str, Enum):
    table = "table"
    json = "json"


def _operands(row: dict) -> str:
    return ", ".join(op["text"] for op in row["operands"])


def _opcode(row: dict) -> str:
    return ".".join([row["opcode"], *row["modifiers"]])


def _shared_rows(module: PtxModule) -> list[dict]:
    return module.shared_instructions().to_pylist()


def _kernel_summary(module: PtxModule, name: str) -> dict:
    row = module.kernel(name)
    return {"kernel": name, "entry": row["entry"], "ptx_line": row["ptx_line"],
            "shared": row["shared"], "params": row["params"]}


def _json(module: PtxModule) -> str:
    by_kernel: dict[str, list] = {}
    for row in _shared_rows(module):
        by_kernel.setdefault(row["kernel"], []).append({
            "instruction": row["instruction"], "ptx_line": row["ptx_line"],
            "source_file": row["source_file"], "source_line": row["source_line"],
            "opcode": _opcode(row), "state_space": row["state_space"],
            "generic": row["state_space"] == "generic", "access_bytes": row["access_bytes"],
            "guard": ("!" if row["guard_negated"] else "") + row["guard"] if row["guard"] else None,
            "operands": [op["text"] for op in row["operands"]], "text": row["text"]})
    kernels = []
    for name in module.function_names():
        summary = _kernel_summary(module, name)
        summary["shared_instructions"] = by_kernel.get(name, [])
        kernels.append(summary)
    return json.dumps(kernels, indent=2)


def _table(module: PtxModule) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    header = f"{module.path}: PTX {module.version or '?'}, {module.target or '?'}, " \
             f"{module.address_size}-bit, {len(module.kernel_names())} kernel(s)"
    table = Table(title=header, title_justify="left")
    for column, justify in (("kernel", "left"), ("#", "right"), ("PTX line", "right"), ("source", "left"),
                            ("instruction", "left"), ("bytes", "right"), ("operands", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    for row in _shared_rows(module):
        source = f"{Path(row['source_file']).name}:{row['source_line']}" if row["source_file"] else ""
        opcode = _opcode(row) + ("  (generic)" if row["state_space"] == "generic" else "")
        guard = f"@{'!' if row['guard_negated'] else ''}{row['guard']} " if row["guard"] else ""
        # PTX is full of [brackets]: escape it so rich does not read it as markup.
        table.add_row(*(escape(cell) for cell in (
            row["kernel"], str(row["instruction"]), str(row["ptx_line"]), source, guard + opcode,
            str(row["access_bytes"]), _operands(row))))
    console.print(table)
    for name in module.function_names():
        shared = module.kernel(name)["shared"]
        if shared:
            described = ", ".join(f"{v['name']} ({'extern, ' if v['extern'] else ''}{v['bytes']} B, "
                                  f"align {v['align']}, {v['scope']})" for v in shared)
            console.print(f"[bold]{escape(name)}[/bold] shared: {escape(described)}")


def _write(module: PtxModule, output: Path) -> None:
    table = module.instructions
    if output.suffix.lower() == ".csv":
        # CSV has no nested types: lists and operands become their text.
        flat = {}
        for name in table.column_names:
            column = table.column(name)
            if name == "operands":
                flat[name] = pa.array(["; ".join(op["text"] for op in ops) for ops in column.to_pylist()])
            elif pa.types.is_list(column.type):
                flat[name] = pc.binary_join(column, ".") if name == "modifiers" else pc.binary_join(column, " ")
            else:
                flat[name] = column
        pa_csv.write_csv(pa.table(flat), output)
    else:
        pq.write_table(table, output)


def parse(ptx: Annotated[Path, typer.Argument(
              help="PTX file (nvcc/Triton output or a cuobjdump -ptx dump), SASS listing or CUDA binary.")],
          format: Annotated[Format, typer.Option("--format", "-f", help="table (default) or json.")] = Format.table,
          output: Annotated[Optional[Path], typer.Option(
              "-o", "--output", help="Write the full INSTRUCTIONS table: .parquet (default) or .csv.")] = None,
          ) -> None:
    """List the kernels of a PTX file (or SASS listing / CUDA binary) and their shared-memory instructions.

    Shared-memory instructions are the ones in the shared state space (ld/st/atom/red,
    ldmatrix/stmatrix, cp.async, mbarrier) plus generic ld/st/atom/red/ldmatrix/stmatrix,
    marked "generic": whether those hit shared memory is decided by the emulator.
    """
    from traceconf.pipeline import input_format
    try:
        sass = input_format(ptx) in ("sass", "cuda_binary")
    except InputError:
        sass = False        # not a known format: the PTX parser says precisely what is wrong
    if sass:
        _parse_sass(ptx, format, output)
        return
    module = parse_file(ptx)
    if output is not None:
        try:
            _write(module, output)
        except OSError as error:
            raise InputError(f"cannot write: {error.strerror or error}", str(output)) from None
    if format is Format.json:
        typer.echo(_json(module))
    else:
        _table(module)


def _parse_sass(path: Path, format: Format, output: Optional[Path]) -> None:
    """SASS listings and CUDA binaries: SASS_KERNELS and the shared-memory rows of SASS_INSTRUCTIONS."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from traceconf.sass.analyze import load_sass_input
    from traceconf.sass.emulate import is_shared
    from traceconf.sass.opcodes import shared_op

    module = load_sass_input(path)
    if output is not None:
        table = module.instructions
        try:
            if output.suffix.lower() == ".csv":
                flat = {name: (pc.binary_join(table.column(name), "." if name == "modifiers" else "; ")
                               if pa.types.is_list(table.column(name).type) else table.column(name))
                        for name in table.column_names}
                pa_csv.write_csv(pa.table(flat), output)
            else:
                pq.write_table(table, output)
        except OSError as error:
            raise InputError(f"cannot write: {error.strerror or error}", str(output)) from None
    rows = [r for r in module.instructions.to_pylist() if is_shared(r)]
    if format is Format.json:
        kernels = []
        for name in module.kernel_names():
            summary = dict(module.kernel(name))
            summary["shared_instructions"] = [
                {"instruction": r["instruction"], "pc": r["pc"], "source_file": r["source_file"],
                 "source_line": r["source_line"], "ptx_line": r["ptx_line"],
                 "opcode": ".".join([r["opcode"], *r["modifiers"]]),
                 "access_bytes": shared_op(".".join([r["opcode"], *r["modifiers"]])).bytes,
                 "guard": ("!" if r["guard_negated"] else "") + r["guard"] if r["guard"] else None,
                 "operands": r["operands"], "text": r["text"]} for r in rows if r["kernel"] == name]
            kernels.append(summary)
        typer.echo(json.dumps(kernels, indent=2))
        return
    table = Table(title=f"{path}: SASS {module.arch or '?'}, {len(module.kernel_names())} kernel(s)",
                  title_justify="left")
    for column, justify in (("kernel", "left"), ("#", "right"), ("pc", "right"), ("source", "left"),
                            ("instruction", "left"), ("bytes", "right")):
        table.add_column(column, justify=justify, overflow="fold")
    for r in rows:
        source = f"{Path(r['source_file']).name}:{r['source_line']}" if r["source_file"] else ""
        opcode = ".".join([r["opcode"], *r["modifiers"]])
        table.add_row(*(escape(cell) for cell in (r["kernel"], str(r["instruction"]), f"{r['pc']:#06x}", source,
                                                   r["text"], str(shared_op(opcode).bytes))))
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("parse")(parse)
