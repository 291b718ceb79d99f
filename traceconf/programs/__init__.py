"""The program layer: an input file as a program the emulator runs, at the level chosen once.

:func:`open_program` detects what the file holds and, for PTX, chooses the level: ``ptx`` emulates the PTX
as written (:class:`~traceconf.programs.ptx.PtxProgram`); ``sass`` assembles it with ptxas for the rule
set's architecture (its ``arch`` key) and emulates what ptxas emitted, what the GPU runs
(:class:`~traceconf.programs.sass.SassProgram`); ``auto`` (:data:`DEFAULT_LEVEL`) does the latter whenever
a ptxas is found and every requested rule set names an architecture ptxas targets, else the former with a
one-line note saying why.  SASS listings and CUDA binaries are SASS programs whatever the level.

Imports here are late: the CLI reads :data:`DEFAULT_LEVEL` without loading numpy or pyarrow.
"""

from __future__ import annotations

from pathlib import Path

from traceconf.errors import InputError

#: The level of every entry point (CLI, API, many inputs) when none is named.
DEFAULT_LEVEL = "auto"
LEVELS = ("auto", "ptx", "sass")
#: Input formats (as :func:`traceconf.traces.detect_format` names them) that are programs, not traces.
PROGRAM_FORMATS = ("ptx", "sass", "cuda_binary")


def choose_level(level: str, rule_sets: list) -> tuple[str, str | None, str | None]:
    """(level to use, architecture to assemble for, note) for PTX input."""
    from traceconf import tools
    from traceconf.sass import toolchain

    if level not in LEVELS:
        raise InputError(f"--level {level!r}: expected one of {', '.join(LEVELS)}")
    if level == "ptx":
        return "ptx", None, None
    arches = {rules.arch for rules in rule_sets}
    ptxas = tools.locate("ptxas")
    if level == "sass":
        tools.find_tool("ptxas")
        tools.find_tool("nvdisasm")
    reasons = []
    if None in arches:
        names = [r.name for r in rule_sets if r.arch is None]
        reasons.append(f"{', '.join(names)} {'are not NVIDIA architectures' if len(names) > 1 else 'is not an NVIDIA architecture'} "
                       "ptxas targets")
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


def open_programs(path: str | Path, input_format: str, level: str, rule_sets: list, launch,
                  kernels: list[str] | None = None, ptxas_options: list[str] | None = None) -> list[tuple]:
    """(program, the rule sets it is counted for) for every architecture the devices need: each NVIDIA device
    counts the SASS of its own architecture (PTX assembled once per architecture; a binary's cubin that the
    device would load), and devices without a ptxas architecture count the PTX as written."""
    if input_format != "ptx":
        from traceconf.programs.sass import SassProgram, load_sass_input
        module = load_sass_input(path)
        groups: dict[str, list] = {}
        for rules in rule_sets:
            groups.setdefault(loaded_arch(rules.arch, module.arches()), []).append(rules)
        return [(SassProgram(module.for_arch(arch) if arch else module, notes=_cubin_note(arch, sets, module)),
                 sets) for arch, sets in groups.items()]
    if level == "ptx":
        return [(open_program(path, input_format, level, rule_sets, launch, kernels, ptxas_options), rule_sets)]
    from traceconf.programs.ptx import PtxProgram
    from traceconf.ptx import parse_file

    module = parse_file(str(path))
    # a device that cannot run the launch at all counts nothing: it stays with the others, whose analysis
    # notes why, rather than failing a program of its own
    runnable = [rules for rules in rule_sets if not _refused_launch(PtxProgram(module), kernels, launch, [rules])]
    by_arch: dict = {}
    for rules in runnable or rule_sets:
        by_arch.setdefault(rules.arch, []).append(rules)
    by_arch[next(iter(by_arch))] += [rules for rules in rule_sets if runnable and rules not in runnable]
    if len(by_arch) == 1:
        return [(open_program(path, input_format, level, rule_sets, launch, kernels, ptxas_options, module),
                 rule_sets)]
    opened = []
    for arch, sets in by_arch.items():
        program = open_program(path, input_format, level, sets, launch, kernels, ptxas_options, module)
        others = [r.name for r in rule_sets if r not in sets]
        program.notes.append(f"{', '.join(r.name for r in sets)} here; {', '.join(others)} in a table of "
                             "their own (each architecture is analysed as its own program)")
        opened.append((program, sets))
    return opened


def loaded_arch(device_arch: str | None, available: list[str]) -> str | None:
    """The cubin architecture a device of ``device_arch`` loads from those a binary holds: its own, else the
    newest of its major version below it (binary compatibility), else the newest there is (an explicit
    choice, noted); None when the binary names none."""
    from traceconf.sass.listing import arch_number

    if not available:
        return None
    if device_arch in available:
        return device_arch
    number = arch_number(device_arch)
    compatible = [a for a in available if arch_number(a) // 10 == number // 10 and arch_number(a) <= number]
    return (compatible or available)[-1]


def _cubin_note(arch: str | None, rule_sets: list, module) -> list[str]:
    """Which cubin the devices count when the binary holds several, or none of their architecture."""
    from traceconf.sass.listing import arch_number

    arches = module.arches()
    if arch is None or (len(arches) < 2 and all(r.arch in (arch, None) for r in rule_sets)):
        return []
    names = ", ".join(r.name for r in rule_sets)
    if all(r.arch == arch for r in rule_sets):
        why = "their own architecture"
    elif all(r.arch and arch_number(r.arch) // 10 == arch_number(arch) // 10 for r in rule_sets):
        why = "the newest of their major version, which the driver loads"
    else:
        why = "no cubin the driver would load for them: the newest there is"
    return [f"{names}: SASS of the {arch} cubin ({why}; the binary holds {', '.join(arches)})"]


def open_program(path: str | Path, input_format: str, level: str, rule_sets: list, launch,
                 kernels: list[str] | None = None, ptxas_options: list[str] | None = None, ptx_module=None):
    """The program of one input file whose format (:data:`PROGRAM_FORMATS`) is known, at the chosen level.

    ``launch`` (a :class:`~traceconf.emulate.launch.LaunchRequest`) and ``kernels`` matter where no device
    could run some selected kernel's launch: such a file stays at the PTX level, whose analysis says why,
    before ptxas is tried.
    """
    from traceconf.programs.ptx import PtxProgram
    from traceconf.programs.sass import SassProgram, load_sass_input

    if input_format != "ptx":
        return SassProgram(load_sass_input(path))
    from traceconf.ptx import parse_file
    from traceconf.sass.listing import arch_number

    chosen, arch, note = choose_level(level, rule_sets)
    ptx = PtxProgram(ptx_module if ptx_module is not None else parse_file(str(path)))
    if chosen == "ptx":
        ptx.notes += [note] if note else []
        return ptx
    targets = {row.get("target") for row in ptx.module.kernels.to_pylist() if row.get("target")}
    newest = max(targets, key=arch_number, default=None)
    if newest and arch_number(newest) > arch_number(arch):
        reason = f"the PTX targets {newest}, newer than {arch}: ptxas cannot assemble it for that device"
        if level == "sass":
            raise InputError(f"--level sass: {reason}", file=str(path))
        ptx.notes.append(f"PTX level: {reason}; the prediction is for the PTX as written")
        return ptx
    if newest and arch_number(newest) == arch_number(arch) and newest != arch:
        arch = newest        # sm_90a PTX (Triton, wgmma) assembles only for the arch-specific target
    if _refused_launch(ptx, kernels, launch, rule_sets):
        return ptx
    return SassProgram.assembled(str(path), arch, ptxas_options, ptx.module)


def _refused_launch(program, kernels: list[str] | None, launch, rule_sets: list) -> bool:
    """Whether some selected kernel's launch no device can run (its [limits])."""
    from traceconf.emulate.launch import block_and_origin, launch_gaps
    from traceconf.names import select_kernels

    for name in select_kernels(program.kernel_names(), kernels or launch.kernel_patterns(), program.path, []):
        row = program.declaration(name)
        try:
            block = block_and_origin(launch.for_kernel(row, program.path).block, row)[0]
        except InputError:
            return True
        shared = program.static_shared_bytes(name) + launch.dynamic_smem
        if len(launch_gaps(rule_sets, block, launch.grid, shared)) == len(rule_sets):
            return True
    return False
