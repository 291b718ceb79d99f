"""``traceconf explain``: draw one warp execution of one instruction, lane by lane.

The per-lane addresses come from the emulation (PTX) or are re-read from the
trace (only the executions of the chosen instruction are kept).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from traceconf.commands.analyze import (Block, Ctas, Data, DynamicSmem, Exhaustive, Grid, Launches, Level, MaxSteps,
                                        MemoryLimit, Params, PtxasOptions, Seed, TimeLimit, WorkLimit, check_input,
                                        fail, input_boundary, launch_request, report_failures, run_file,
                                        stdout_console)
from traceconf.errors import InputError
from traceconf.programs import DEFAULT_LEVEL, PROGRAM_FORMATS
from traceconf.rules import DEFAULT_DEVICE, load_rule_sets

if TYPE_CHECKING:
    import pyarrow as pa

    from traceconf.accesses import WarpAccesses


def _program_executions(file: Path, kernel: str, launch, rules, level: str,
                        ptxas_options: list[str] | None) -> tuple[pa.Table, WarpAccesses, list, dict]:
    """PTX (at the chosen level), SASS listings and CUDA binaries: emulate and keep the accesses (and which
    copies' sources were taken at cudaMalloc's alignment)."""
    analyses, failures = run_file(file, [kernel], launch, [rules], level=level, ptxas_options=ptxas_options)
    if failures:
        report_failures(failures)
        raise typer.Exit(2)
    if len(analyses) != 1:
        raise InputError(f"--kernel {kernel!r} matches {len(analyses)} kernels "
                         f"({', '.join(a.kernel for a in analyses)}); name one", file=str(file))
    analysis = analyses[0]
    return analysis.instructions, analysis.accesses[rules.warp_size], analysis.unresolved, analysis.aligned_sources


def explain(
    file: Annotated[Path, typer.Argument(help="PTX file or shared-memory trace.")],
    kernel: Annotated[str, typer.Option(
        "--kernel", "-k", help="Kernel: exact (mangled or demangled) name, bare function name, part of a name "
        "or a regex; it must select one kernel.")],
    instruction: Annotated[str, typer.Option(
        "--instruction", "-i",
        help="Instruction id, PTX line (L123), CUDA source line (file.cu:42) or SASS pc (0x1a0).")],
    warp: Annotated[Optional[int], typer.Option("--warp", "-w", min=0, help="Warp index inside the CTA.")] = None,
    execution: Annotated[Optional[int], typer.Option(
        "--execution", "-e", min=0,
        help="N-th execution of the instruction by that warp (default: the worst one).")] = None,
    device: Annotated[str, typer.Option("--device", "-d", help="Rule set (device).")] = DEFAULT_DEVICE,
    svg: Annotated[Optional[Path], typer.Option("--svg", help="Also write the picture as SVG.")] = None,
    block: Block = None,
    grid: Grid = None,
    param: Params = None,
    dynamic_smem: DynamicSmem = None,
    launches: Launches = None,
    data: Data = None,
    seed: Seed = 0,
    ctas: Ctas = None,
    max_steps: MaxSteps = 10_000_000,
    time_limit: TimeLimit = None,
    work_limit: WorkLimit = None,
    memory_limit: MemoryLimit = None,
    exhaustive: Exhaustive = False,
    level: Level = DEFAULT_LEVEL,
    ptxas_option: PtxasOptions = None,
) -> None:
    """Show which lane hits which bank and word in one warp execution, and which lanes collide."""
    from traceconf.analyses.lookup import resolve_instruction, trace_executions
    from traceconf.pipeline import input_format
    from traceconf.report.explain import explain_instruction, render_terminal
    from traceconf.report.source import source_text
    from traceconf.report.svg import render_svg

    with input_boundary(file):
        check_input(file, folder=True)
        (rules,) = load_rule_sets([device])
        if input_format(file) in PROGRAM_FORMATS:
            launch = launch_request(block, grid, param, dynamic_smem, ctas, max_steps, launches, data, seed,
                                    time_limit, memory_limit, exhaustive, work_limit=work_limit)
            info, accesses, unresolved, aligned = _program_executions(file, kernel, launch, rules, level,
                                                                      ptxas_option)
            ident, others = resolve_instruction(info, instruction, str(file))
            reason = {int(u["instruction"]): u.get("reason") for u in unresolved}.get(ident)
            if reason:
                raise InputError(f"instruction {ident} is unresolved: {reason}", file=str(file))
        else:
            info, ident, accesses = trace_executions(file, kernel, instruction, rules)
            aligned = {}
            others = resolve_instruction(info, instruction, str(file))[1]
        row = next(r for r in info.to_pylist() if r["instruction"] == ident)
        where = f"{Path(row['source_file']).name}:{row['source_line']}" if row["source_file"] and row["source_line"] \
            else None
        code = source_text(row["source_file"], row["source_line"], str(file))
    try:
        # The picture is the engine's own lane assignment for that execution, not a redrawing of the rules.
        pic = explain_instruction(accesses, ident, rules, row["text"], warp, execution, where, code,
                                  aligned.get(ident))
    except LookupError as error:        # never executed, or no such --warp / --execution
        raise fail(InputError(str(error), file=str(file))) from None
    console = stdout_console()
    console.print(render_terminal(pic))
    if others:
        console.print(f"also on that line: instruction(s) {', '.join(map(str, others))} (pass the id to see them)",
                      style="dim")
    if svg is not None:
        from traceconf.outputs import write_text
        try:
            write_text(svg, render_svg(pic), inputs=[file])
        except InputError as error:
            raise fail(error) from None


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)
