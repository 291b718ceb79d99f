"""The SASS level of the pipeline: listings, CUDA binaries, and PTX assembled by ptxas → one analysis per kernel.

``--level`` on PTX input: ``ptx`` emulates the PTX as written; ``sass``
assembles it with ptxas for the rule set's architecture and emulates what
ptxas emitted (what the GPU runs); ``auto`` does the latter whenever a ptxas
is found and every requested rule set is an NVIDIA architecture that ptxas
targets, else the former with a one-line note saying why.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from traceconf.errors import InputError
from traceconf.names import select_kernels
from traceconf.pipeline import (KernelAnalysis, KernelFailure, LaunchRequest, Progress, check_some_device,
                                emulate_and_count, kernel_failure, launch_gaps, launch_notes, scale_facts)
from traceconf.schemas import INSTRUCTION_INFO

if TYPE_CHECKING:
    from traceconf.sass.listing import SassModule

LEVELS = ("auto", "ptx", "sass")


def load_sass_input(path: str | Path) -> "SassModule":
    """A SASS listing (text) or a CUDA binary (disassembled with the found tools), by content."""
    from traceconf.sass import toolchain
    from traceconf.sass.binary import load_binary
    from traceconf.sass.listing import parse_file

    with open(path, "rb") as raw:
        head = raw.read(64)
    if toolchain.is_cuda_binary(head):
        return load_binary(path)
    return parse_file(path)


def assemble_ptx(path: str | Path, arch: str, options: list[str] | None = None, ptx_module=None):
    """PTX file → ptxas (cached) → SASS module with parameter names and offsets, and the parsed PTX."""
    from traceconf.ptx import parse_file
    from traceconf.sass import toolchain
    from traceconf.sass.binary import elf_facts, with_elf_facts
    from traceconf.sass.listing import parse_text

    path = str(path)
    ptx_module = ptx_module if ptx_module is not None else parse_file(path)
    cubin = toolchain.assemble(Path(path).read_bytes(), arch, list(options or []), what=path)
    listing, elf = toolchain.disassemble(cubin, f"{path} (assembled for {arch})")
    module = with_elf_facts(parse_text(listing, path), elf_facts(elf))
    _name_params(module, ptx_module)
    module.path, module.from_ptx = path, True
    return module, ptx_module


def _name_params(module, ptx_module) -> None:
    """ELF parameter offsets keep their values; names come from the PTX signature, by ordinal."""
    from traceconf.sass.binary import with_ptx_signature
    from traceconf.schemas import SASS_KERNELS

    elf_rows = {row["kernel"]: row["params"] for row in module.kernels.to_pylist()}
    with_ptx_signature(module, ptx_module)
    rows = module.kernels.to_pylist()
    for row in rows:
        elf = elf_rows.get(row["kernel"])
        if elf and row["params"] and len(elf) == len(row["params"]):
            row["params"] = [{**e, "name": p["name"]} for e, p in zip(elf, row["params"])]
        elif elf:
            row["params"] = elf
    module.kernels = pa.Table.from_pylist(rows, schema=SASS_KERNELS)


def sass_arch(rules) -> str | None:
    """The ptxas architecture of an NVIDIA rule set (sm_90 → sm_90), else None."""
    match = re.fullmatch(r"sm_(\d{2,3})[a-z]?", rules.name)      # sm_2x, sm_3x_8byte: families, not targets
    if not match or rules.vendor.lower() != "nvidia":
        return None
    return rules.name


def choose_level(level: str, rule_sets: list) -> tuple[str, str | None, str | None]:
    """(level to use, architecture to assemble for, note) for PTX input."""
    from traceconf import tools
    from traceconf.sass import toolchain

    if level not in LEVELS:
        raise InputError(f"--level {level!r}: expected one of {', '.join(LEVELS)}")
    if level == "ptx":
        return "ptx", None, None
    arches = {sass_arch(rules) for rules in rule_sets}
    ptxas = tools.locate("ptxas")
    if level == "sass":
        tools.find_tool("ptxas")
        tools.find_tool("nvdisasm")
    reasons = []
    if None in arches:
        names = ", ".join(r.name for r in rule_sets if sass_arch(r) is None)
        reasons.append(f"{names} is not an NVIDIA architecture ptxas targets")
    elif len(arches) > 1:
        reasons.append("the rule sets name several architectures (one SASS per run)")
    elif ptxas is None:
        reasons.append("no ptxas found (" + tools.INSTALL_HINTS["ptxas"] + ")")
    elif tools.locate("nvdisasm") is None:
        reasons.append("no nvdisasm found (" + tools.INSTALL_HINTS["nvdisasm"] + ")")
    else:
        targets = toolchain.ptxas_targets()
        arch = next(iter(arches))
        if targets and arch not in targets:
            reasons.append(f"this ptxas does not target {arch}")
    if reasons:
        if level == "sass":
            raise InputError(f"--level sass: {reasons[0]}")
        return "ptx", None, f"PTX level: {reasons[0]}; the prediction is for the PTX as written"
    return "sass", next(iter(arches)), None


def _instruction_info(module, kernel: str, rows: list[dict], ids, kinds: dict[int, str],
                      widths: dict[int, int]) -> pa.Table:
    from traceconf.sass.emulate import is_shared
    from traceconf.sass.opcodes import shared_op, uncounted_op

    wanted = set(ids) | {row["instruction"] for row in rows if is_shared(row) or uncounted_op(row["opcode"])}
    out = []
    for row in rows:
        ident = row["instruction"]
        if ident not in wanted:
            continue
        op = shared_op(".".join([row["opcode"], *(row["modifiers"] or [])]))
        uncounted = uncounted_op(row["opcode"])
        out.append({"kernel": kernel, "instruction": ident, "text": row["text"],
                    "kind": kinds.get(ident) or (op.kind if op else uncounted[0] if uncounted else row["opcode"]),
                    "bytes": widths.get(ident, op.bytes if op else 0), "ptx_line": row.get("ptx_line"),
                    "pc": row["pc"], "source_file": row["source_file"], "source_line": row["source_line"]})
    return pa.Table.from_pylist(out, schema=INSTRUCTION_INFO)


def analyze_sass_kernel(module, kernel: str, launch: LaunchRequest, rule_sets: list,
                        progress: Progress | None = None, ptx_module=None, input_format: str = "sass",
                        extra_notes: list[str] | None = None) -> KernelAnalysis:
    """Emulate one SASS kernel and run every rule set on it (SASS warps are 32 lanes)."""
    from traceconf.sass.emulate import emulate_sass
    from traceconf.sass.opcodes import uncounted_op

    kernel_row = module.kernel(kernel)
    path = str(module.path)
    declared = ptx_module.kernel(kernel) if ptx_module is not None and kernel in ptx_module.function_names() else {}
    # The launch is read as for PTX: .reqntid/.maxntid from the PTX the SASS came from, parameters by their names.
    decl = {"kernel": kernel, "params": kernel_row.get("params") or [], "reqntid": declared.get("reqntid"),
            "maxntid": declared.get("maxntid")}
    launch = launch.for_kernel(decl, path)
    gaps = launch_gaps(rule_sets, launch.block_for(decl, path), launch.grid,
                       int(kernel_row.get("shared_bytes") or 0) + launch.dynamic_smem)
    gaps.update({rules.name: f"rule set {rules.name} has {rules.warp_size}-lane wavefronts; SASS runs 32-lane "
                             "warps (analyse the PTX for AMD devices)" for rules in rule_sets if rules.warp_size != 32
                 and rules.name not in gaps})
    check_some_device(gaps, rule_sets)

    def emulate_for(warp_size: int, row_bytes: int, consume):
        return emulate_sass(module, kernel, launch.emulator_launch(decl, path, warp_size, row_bytes),
                            progress=progress, consume=consume)

    counted = emulate_and_count(emulate_for, rule_sets, gaps, launch.retain)
    emulation = counted.emulation
    kinds, widths = counted.kinds, counted.widths
    rows = module.instructions_of(kernel)
    unresolved = list(emulation.unresolved)
    seen = {u["instruction"] for u in unresolved}
    unresolved += [{"instruction": int(row["instruction"]), "ptx": row["text"], "pc": int(row["pc"]),
                    "reason": found[1]} for row in rows
                   if (found := uncounted_op(row["opcode"])) and row["instruction"] not in seen]
    info = _instruction_info(module, kernel, rows, list(kinds) + [u["instruction"] for u in unresolved],
                             kinds, widths)
    facts = launch.describe(decl, path)
    facts["level"] = "sass"
    facts["arch"] = kernel_row.get("arch") or module.arch
    notes = list(extra_notes or []) + list(emulation.notes) + [f"not counted on {device}: {reason}"
                                                                for device, reason in gaps.items()]
    notes += launch_notes(facts)
    if ptx_module is not None and kernel in ptx_module.kernel_names():
        from traceconf.sass.rewrites import ptxas_rewrites
        explanations, removed = ptxas_rewrites(rows, ptx_module.instructions_of(kernel))
        text = {row["instruction"]: row for row in rows}
        by_line: dict[str, list[int]] = {}
        for ident, line in sorted(explanations.items()):
            by_line.setdefault(line, []).append(text[ident]["pc"])
        for line, pcs in by_line.items():
            # an unrolled loop repeats one rewrite: one note names every copy
            shown = ", ".join(f"{pc:#x}" for pc in pcs[:3]) + (f" (+{len(pcs) - 3} more)" if len(pcs) > 3 else "")
            notes.append(f"pc {shown}: {line}")
        notes += removed
    scale_facts(emulation, facts, notes, counted, launch.retain)
    return KernelAnalysis(kernel=kernel, input_path=path, input_format=input_format, launch=facts,
                          results=counted.results, instructions=info, unresolved=unresolved, notes=notes,
                          accesses=counted.accesses, weights=counted.weights, complete=counted.complete,
                          device_gaps=gaps)


def run_sass_module(module, kernels: list[str] | None, launch: LaunchRequest, rule_sets: list,
                    progress: Progress | None = None, ptx_module=None, input_format: str = "sass",
                    extra_notes: list[str] | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    names = select_kernels(module.kernel_names(), kernels, str(module.path))
    done, failed = [], []
    for name in names:
        try:
            done.append(analyze_sass_kernel(module, name, launch, rule_sets, progress, ptx_module, input_format,
                                            extra_notes))
        except Exception as error:   # one kernel's failure, whatever it is, never hides the others
            failed.append(kernel_failure(name, error, str(module.path)))
    return done, failed


def run_sass_file(path: str | Path, kernels: list[str] | None, launch: LaunchRequest, rule_sets: list,
                  progress: Progress | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """A SASS listing or CUDA binary."""
    module = load_sass_input(path)
    names = select_kernels(module.kernel_names(), kernels or launch.kernel_patterns(), str(path))
    launch.check_params([module.kernel(name) for name in names], str(path))   # a --data/--param no kernel has
    return run_sass_module(module, kernels, launch, rule_sets, progress)


def run_ptx_at_level(path: str | Path, kernels: list[str] | None, launch: LaunchRequest, rule_sets: list,
                     level: str = "auto", ptxas_options: list[str] | None = None,
                     progress: Progress | None = None) -> tuple[list[KernelAnalysis], list[KernelFailure]]:
    """PTX input at the chosen level (see the module docstring)."""
    from traceconf.pipeline import run_ptx

    chosen, arch, note = choose_level(level, rule_sets)
    if chosen == "ptx":
        done, failed = run_ptx(path, kernels, launch, rule_sets, progress)
        if note:
            for analysis in done:
                analysis.notes.insert(0, note)
        return done, failed
    from traceconf.ptx import parse_file
    from traceconf.sass.listing import arch_number

    ptx_module = parse_file(str(path))
    targets = {row.get("target") for row in ptx_module.kernels.to_pylist() if row.get("target")}
    newest = max(targets, key=arch_number, default=None)
    if newest and arch_number(newest) > arch_number(arch):
        reason = f"the PTX targets {newest}, newer than {arch}: ptxas cannot assemble it for that device"
        if level == "sass":
            raise InputError(f"--level sass: {reason}", file=str(path))
        done, failed = run_ptx(path, kernels, launch, rule_sets, progress)
        for analysis in done:
            analysis.notes.insert(0, f"PTX level: {reason}; the prediction is for the PTX as written")
        return done, failed
    if newest and arch_number(newest) == arch_number(arch) and newest != arch:
        arch = newest        # sm_90a PTX (Triton, wgmma) assembles only for the arch-specific target
    if _refused_launch(ptx_module, kernels, launch, rule_sets, str(path)):
        return run_ptx(path, kernels, launch, rule_sets, progress)    # says why, before ptxas/nvdisasm try it
    module, ptx_module = assemble_ptx(path, arch, ptxas_options, ptx_module)
    options = "".join(" " + option for option in ptxas_options or [])
    entries = [name for name in ptx_module.kernel_names() if ptx_module.kernel(name).get("entry", True)]
    names = select_kernels(entries, kernels or launch.kernel_patterns(), str(path))
    launch.check_params([ptx_module.kernel(name) for name in names], str(path))
    return run_sass_module(module, names, launch, rule_sets, progress, ptx_module=ptx_module,
                           input_format="ptx", extra_notes=[f"SASS level: ptxas -arch={arch}{options}; counts "
                                                            "are for the code the GPU runs"])


def _refused_launch(ptx_module, kernels, launch: LaunchRequest, rule_sets: list, path: str) -> bool:
    """Whether some selected kernel's launch no device can run (its [limits]): the PTX path reports that."""
    from traceconf.emulate.launch import static_shared_bytes

    names = select_kernels(ptx_module.kernel_names(), kernels or launch.kernel_patterns(), path)
    for name in names:
        row = ptx_module.kernel(name)
        try:
            block = launch.for_kernel(row, path).block_for(row, path)
        except InputError:
            return True
        shared = static_shared_bytes(row) + launch.dynamic_smem
        if len(launch_gaps(rule_sets, block, launch.grid, shared)) == len(rule_sets):
            return True
    return False
