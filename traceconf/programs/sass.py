"""A SASS program: a listing, a CUDA binary, or PTX assembled by ptxas (the SASS level).

SASS warps are 32 lanes.  Assembled from PTX, the kernel's launch is read as for the PTX (``.reqntid`` /
``.maxntid`` of the PTX it came from, parameters by their PTX names) and each instruction names the PTX line
ptxas recorded for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from traceconf.sass.emulate import emulate_sass, is_shared
from traceconf.sass.opcodes import shared_op, uncounted_op
from traceconf.schemas import INSTRUCTION_INFO
from traceconf.sources import toolkit_header, with_source_names


def load_sass_input(path: str | Path):
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


@dataclass
class SassProgram:
    """A SASS module (:class:`traceconf.sass.listing.SassModule`); ``ptx_module``: the PTX it was assembled
    from, if any."""

    module: object
    ptx_module: object = None
    notes: list[str] = field(default_factory=list)
    input_format: str = "sass"

    @classmethod
    def assembled(cls, path: str, arch: str, options: list[str] | None, ptx_module) -> "SassProgram":
        """The SASS ptxas makes of a PTX file for ``arch``."""
        module, ptx_module = assemble_ptx(path, arch, options, ptx_module)
        flags = "".join(" " + option for option in options or [])
        return cls(module, ptx_module, input_format="ptx",
                   notes=[f"SASS level: ptxas -arch={arch}{flags}; counts are for the code the GPU runs"])

    @property
    def path(self) -> str:
        return str(self.module.path)

    def kernel_names(self) -> list[str]:
        if self.ptx_module is None:
            return self.module.kernel_names()
        return [name for name in self.ptx_module.kernel_names() if self.ptx_module.kernel(name).get("entry", True)]

    def declaration(self, kernel: str) -> dict:
        declared = self.ptx_module.kernel(kernel) if self.ptx_module is not None and \
            kernel in self.ptx_module.function_names() else {}
        row = {"kernel": kernel, "params": self.module.kernel(kernel).get("params") or [],
               "reqntid": declared.get("reqntid"), "maxntid": declared.get("maxntid")}
        return with_source_names(row, self.module.instructions_of(kernel), self.path)

    def static_shared_bytes(self, kernel: str) -> int:
        return int(self.module.kernel(kernel).get("shared_bytes") or 0)

    def unsupported(self, rules) -> str | None:
        if rules.warp_size == 32:
            return None
        return (f"rule set {rules.name} has {rules.warp_size}-lane wavefronts; SASS runs 32-lane warps (analyse "
                "the PTX for AMD devices)")

    def emulate(self, kernel, launch, progress, consume):
        return emulate_sass(self.module, kernel, launch, progress=progress, consume=consume)

    def uncounted(self, kernel: str) -> list[dict]:
        return [{"instruction": int(row["instruction"]), "ptx": row["text"], "pc": int(row["pc"]),
                 "reason": found[1]}
                for row in self.module.instructions_of(kernel) if (found := uncounted_op(row["opcode"]))]

    def instruction_info(self, kernel: str, ids: list[int], kinds: dict[int, str],
                         widths: dict[int, int]) -> pa.Table:
        rows = self.module.instructions_of(kernel)
        wanted = set(ids) | {row["instruction"] for row in rows if is_shared(row) or uncounted_op(row["opcode"])}
        user_line = self._user_lines()
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
                        "pc": row["pc"], **user_line(row)})
        return pa.Table.from_pylist(out, schema=INSTRUCTION_INFO)

    def _user_lines(self):
        """row -> its source_file/source_line; an instruction the line info places in a toolkit header
        (atomicAdd's body) goes to the user's line, which the PTX it was assembled from names (``inlined_at``)."""
        source = {}
        if self.ptx_module is not None:
            table = self.ptx_module.instructions.select(["ptx_line", "source_file", "source_line"]).to_pylist()
            source = {r["ptx_line"]: r for r in table}

        def place(row: dict) -> dict:
            mapped = source.get(row.get("ptx_line")) if toolkit_header(row["source_file"]) else None
            found = mapped if mapped and mapped["source_line"] else row
            return {"source_file": found["source_file"], "source_line": found["source_line"]}
        return place

    def kernel_facts(self, kernel: str) -> dict:
        return {"level": "sass", "arch": self.module.kernel(kernel).get("arch") or self.module.arch}

    def kernel_notes(self, kernel: str) -> list[str]:
        """What ptxas rewrote, one note per PTX line (an unrolled loop repeats one rewrite: one note names
        every copy)."""
        if self.ptx_module is None or kernel not in self.ptx_module.kernel_names():
            return []
        from traceconf.sass.rewrites import ptxas_rewrites

        rows = self.module.instructions_of(kernel)
        explanations, removed = ptxas_rewrites(rows, self.ptx_module.instructions_of(kernel))
        pcs = {row["instruction"]: row["pc"] for row in rows}
        by_line: dict[str, list[int]] = {}
        for ident, line in sorted(explanations.items()):
            by_line.setdefault(line, []).append(pcs[ident])
        notes = []
        for line, found in by_line.items():
            shown = ", ".join(f"{pc:#x}" for pc in found[:3]) + (f" (+{len(found) - 3} more)" if len(found) > 3 else "")
            notes.append(f"pc {shown}: {line}")
        return notes + removed
