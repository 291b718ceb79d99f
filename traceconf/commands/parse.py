"""``traceconf parse``: the kernels of a PTX file and their shared-memory instructions."""

from __future__ import annotations

import gc
import json
import sys
from json.encoder import encode_basestring_ascii
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from traceconf.errors import InputError
from traceconf.names import short_name

if TYPE_CHECKING:
    from traceconf.ptx import PtxModule


class Format(str, Enum):
    table = "table"
    json = "json"


def _columns(module: PtxModule) -> dict[str, list]:
    """The shared-memory instructions' columns as Python lists, read column by column (row dicts of a
    million-line file cost more than the parse itself)."""
    import pyarrow.compute as pc

    table = module.shared_instructions()
    columns = {name: table.column(name).to_pylist() for name in (
        "kernel", "instruction", "ptx_line", "source_file", "source_line", "opcode", "state_space",
        "access_bytes", "guard", "guard_negated", "text")}
    modifiers = table.column("modifiers").combine_chunks()
    columns["opcode_text"] = pc.binary_join_element_wise(
        table.column("opcode"), pc.fill_null(pc.binary_join(modifiers, "."), ""), ".").to_pylist()
    columns["opcode_text"] = [text.rstrip(".") for text in columns["opcode_text"]]
    operands = table.column("operands").combine_chunks()
    texts = pc.struct_field(pc.list_flatten(operands), "text").to_pylist()
    offsets = operands.offsets.to_pylist()
    columns["operands"] = [texts[a:b] for a, b in zip(offsets, offsets[1:])]
    return columns


def _json(module: PtxModule) -> str:
    """A JSON array with one kernel per line, no indent: each instruction's object is written straight from the
    columns (the C string encoder for the texts), what ``json.dumps`` of the same dict writes, without building
    the dicts (millions of lines stay fast)."""
    c = _columns(module)
    text = encode_basestring_ascii
    by_kernel: dict[str, list[str]] = {}
    rows = zip(c["kernel"], c["instruction"], c["ptx_line"], c["source_file"], c["source_line"], c["opcode_text"],
               c["state_space"], c["access_bytes"], c["guard"], c["guard_negated"], c["operands"], c["text"])
    for kernel, instruction, ptx_line, source_file, source_line, opcode, space, size, guard, negated, operands, \
            source in rows:
        by_kernel.setdefault(kernel, []).append(
            f'{{"instruction": {_number(instruction)}, "ptx_line": {_number(ptx_line)}, '
            f'"source_file": {_string(source_file)}, "source_line": {_number(source_line)}, '
            f'"opcode": {_string(opcode)}, "state_space": {_string(space)}, '
            f'"generic": {"true" if space == "generic" else "false"}, "access_bytes": {_number(size)}, '
            f'"guard": {text(("!" if negated else "") + guard) if guard else "null"}, '
            f'"operands": [{", ".join(map(text, operands))}], "text": {_string(source)}}}')
    kernels = [json.dumps(_kernel_summary(row))[:-1] + f', "shared_instructions": '
               f'[{", ".join(by_kernel.get(row["kernel"], ()))}]}}' for row in module.kernels.to_pylist()]
    return "[\n" + ",\n".join(kernels) + "\n]" if kernels else "[]"


def _number(value: int | None) -> str:
    return "null" if value is None else str(int(value))


def _string(value: str | None) -> str:
    return "null" if value is None else encode_basestring_ascii(value)


def _kernel_summary(row: dict) -> dict:
    return {"kernel": row["kernel"], "entry": row["entry"], "ptx_line": row["ptx_line"],
            "shared": row["shared"], "params": row["params"]}


def _table(module: PtxModule) -> None:
    """The PTX kernels' shared-memory instructions as plain text, one per line, kernels by their readable name."""
    c = _columns(module)
    out = sys.stdout
    out.write(f"{module.path}: PTX {module.version or '?'}, {module.target or '?'}, {module.address_size}-bit, "
              f"{len(module.kernel_names())} kernel(s), {len(c['kernel'])} shared-memory instruction(s)\n")
    rows = []
    for i, kernel in enumerate(c["kernel"]):
        source = f"{Path(c['source_file'][i]).name}:{c['source_line'][i]}" if c["source_file"][i] else ""
        opcode = c["opcode_text"][i] + ("  (generic)" if c["state_space"][i] == "generic" else "")
        guard = f"@{'!' if c['guard_negated'][i] else ''}{c['guard'][i]} " if c["guard"][i] else ""
        rows.append((short_name(kernel, 40), str(c["instruction"][i]), str(c["ptx_line"][i]), source,
                     guard + opcode, str(c["access_bytes"][i]), ", ".join(c["operands"][i])))
    _plain_table(("kernel", "#", "PTX line", "source", "instruction", "bytes", "operands"),
                 (False, True, True, False, False, True), rows)
    for row in module.kernels.to_pylist():
        name, shared = row["kernel"], row["shared"]
        if shared:
            described = ", ".join(f"{v['name']} ({'extern, ' if v['extern'] else ''}{v['bytes']} B, "
                                  f"align {v['align']}, {v['scope']})" for v in shared)
            out.write(f"{short_name(name)} shared: {described}\n")


def _plain_table(header: tuple[str, ...], right: tuple[bool, ...], rows: list[tuple[str, ...]]) -> None:
    """Aligned plain text, one row per line, never folded (grep and diff read it; fast for millions of rows):
    every column but the last padded to its widest cell, right-aligned where ``right`` says."""
    rows = [header, *rows]
    widths = [max(len(row[k]) for row in rows) for k in range(len(header) - 1)]
    write = sys.stdout.write
    for row in rows:
        cells = [cell.rjust(w) if r else cell.ljust(w) for cell, w, r in zip(row, widths, right)]
        write("  ".join(cells + [row[-1]]).rstrip() + "\n")


def _write(table, output: Path, suffix: str) -> None:
    """INSTRUCTIONS or SASS_INSTRUCTIONS as Parquet, or as CSV, which has no nested types: modifiers are joined
    with '.', operands with '; ' (their text), other lists with ' '."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    if suffix != ".csv":
        pq.write_table(table, output)
        return
    flat = {}
    for name in table.column_names:
        column = table.column(name)
        if name == "operands" and pa.types.is_struct(column.type.value_type):
            column = pa.array([[op["text"] for op in ops] for ops in column.to_pylist()], pa.list_(pa.string()))
        if pa.types.is_list(column.type):
            column = pc.binary_join(column, {"modifiers": ".", "operands": "; "}.get(name, " "))
        flat[name] = column
    pa_csv.write_csv(pa.table(flat), output)


def parse(ptx: Annotated[Path, typer.Argument(
              help="PTX file (nvcc/Triton output or a cuobjdump -ptx dump), SASS listing or CUDA binary.")],
          format: Annotated[Format, typer.Option("--format", "-f", help="table (default) or json.")] = Format.table,
          output: Annotated[Optional[Path], typer.Option(
              "-o", "--output", help="Write the full INSTRUCTIONS table: .parquet (default) or .csv.")] = None,
          ) -> None:
    """List the kernels of a PTX file (or SASS listing / CUDA binary) and their shared-memory instructions.

    Shared-memory instructions are the ones that can access shared memory: ld/st/atom/red,
    ldmatrix/stmatrix and cp.async in the shared state space, plus the generic ones, marked
    "generic": whether those hit shared memory is decided by the emulator.
    """
    from traceconf.pipeline import input_format
    from traceconf.ptx import parse_file

    from traceconf.outputs import atomic_output, check_not_input, check_writable

    if output is not None:
        check_not_input(output, [ptx])
        check_writable(output)
    try:
        sass = input_format(ptx) in ("sass", "cuda_binary")
    except InputError:
        sass = False        # not a known format: the PTX parser says precisely what is wrong
    if sass:
        _parse_sass(ptx, format, output)
        return
    module = parse_file(ptx)
    # The parse leaves ~10^5 young objects, all acyclic (freed by reference counts alone), that the next
    # collections and the one at exit would scan: a fifth of the command's time on a large file.  Frozen,
    # the collector skips them (and the imported modules).
    gc.freeze()
    if output is not None:
        with atomic_output(output, inputs=[ptx]) as temporary:
            _write(module.instructions, temporary, output.suffix.lower())
    if format is Format.json:
        typer.echo(_json(module))
    else:
        _table(module)


def _parse_sass(path: Path, format: Format, output: Optional[Path]) -> None:
    """SASS listings and CUDA binaries: SASS_KERNELS and the shared-memory rows of SASS_INSTRUCTIONS, in the
    PTX path's forms (one JSON line per kernel, a plain table of one instruction per line)."""
    from traceconf.outputs import atomic_output
    from traceconf.programs.sass import load_sass_input
    from traceconf.sass.emulate import is_shared
    from traceconf.sass.opcodes import shared_op

    module = load_sass_input(path)
    if output is not None:
        with atomic_output(output, inputs=[path]) as temporary:
            _write(module.instructions, temporary, output.suffix.lower())
    rows = [r for r in module.instructions.to_pylist() if is_shared(r)]
    for r in rows:
        r["opcode_text"] = ".".join([r["opcode"], *r["modifiers"]])
    if format is Format.json:
        kernels = []
        for name in module.kernel_names():
            summary = dict(module.kernel(name))
            summary["shared_instructions"] = [
                {"instruction": r["instruction"], "pc": r["pc"], "source_file": r["source_file"],
                 "source_line": r["source_line"], "ptx_line": r["ptx_line"], "opcode": r["opcode_text"],
                 "access_bytes": shared_op(r["opcode_text"]).bytes,
                 "guard": ("!" if r["guard_negated"] else "") + r["guard"] if r["guard"] else None,
                 "operands": r["operands"], "text": r["text"]} for r in rows if r["kernel"] == name]
            kernels.append(json.dumps(summary))
        typer.echo("[\n" + ",\n".join(kernels) + "\n]" if kernels else "[]")
        return
    sys.stdout.write(f"{path}: SASS {module.arch or '?'}, {len(module.kernel_names())} kernel(s), "
                     f"{len(rows)} shared-memory instruction(s)\n")
    _plain_table(("kernel", "#", "pc", "source", "instruction", "bytes"), (False, True, True, False, False, True),
                 [(short_name(r["kernel"], 40), str(r["instruction"]), f"{r['pc']:#06x}",
                   f"{Path(r['source_file']).name}:{r['source_line']}" if r["source_file"] else "", r["text"],
                   str(shared_op(r["opcode_text"]).bytes)) for r in rows])


def register(app: typer.Typer) -> None:
    app.command("parse")(parse)
