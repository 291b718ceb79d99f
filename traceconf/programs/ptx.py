"""A PTX program analysed as written (the PTX level)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from traceconf.emulate.launch import static_shared_bytes
from traceconf.ptx.opcodes import shared_access_kind, uncounted_shared_op
from traceconf.schemas import INSTRUCTION_INFO
from traceconf.sources import with_source_names


@dataclass
class PtxProgram:
    """A parsed PTX module (:func:`traceconf.ptx.parse_file`), emulated instruction by instruction."""

    module: object
    notes: list[str] = field(default_factory=list)
    input_format: str = "ptx"
    declared: dict = field(default_factory=dict)      # kernel -> declaration with the source's parameter names

    @property
    def path(self) -> str:
        return str(self.module.path)

    def kernel_names(self) -> list[str]:
        return self.module.kernel_names()

    def declaration(self, kernel: str) -> dict:
        if kernel not in self.declared:
            self.declared[kernel] = with_source_names(self.module.kernel(kernel), self.module.instructions_of(kernel),
                                                      self.path)
        return self.declared[kernel]

    def static_shared_bytes(self, kernel: str) -> int:
        return static_shared_bytes(self.module.kernel(kernel))

    def unsupported(self, rules) -> str | None:
        return None

    def emulate(self, kernel, launch, progress, consume):
        from traceconf.emulate import emulate
        return emulate(self.module, kernel, launch, progress=progress, consume=consume)

    def uncounted(self, kernel: str) -> list[dict]:
        return [{"instruction": int(row["instruction"]), "ptx": row["text"], "ptx_line": int(row["ptx_line"]),
                 "reason": found[1]}
                for row in self.module.instructions_of(kernel)
                if not shared_access_kind(row["opcode"], row["state_space"], row["modifiers"])
                and (found := uncounted_shared_op(row["opcode"], row["modifiers"]))]

    def instruction_info(self, kernel: str, ids: list[int], kinds: dict[int, str],
                         widths: dict[int, int]) -> pa.Table:
        static = [row["instruction"] for row in self.module.instructions_of(kernel)
                  if shared_access_kind(row["opcode"], row["state_space"], row["modifiers"])
                  or uncounted_shared_op(row["opcode"], row["modifiers"])]
        ordered = sorted(set(ids) | set(static))
        # Instruction ids are module-wide ordinals, i.e. row numbers of the INSTRUCTIONS table.
        rows = self.module.instructions.take(pa.array(ordered, pa.int64())).to_pylist()
        out = []
        for ident, row in zip(ordered, rows):
            kind = kinds.get(ident) or shared_access_kind(row["opcode"], row["state_space"], row["modifiers"]) \
                or (uncounted_shared_op(row["opcode"], row["modifiers"]) or (row["opcode"],))[0]
            out.append({"kernel": kernel, "instruction": ident, "text": row["text"], "kind": kind,
                        "bytes": widths.get(ident, row["access_bytes"] or 0), "ptx_line": row["ptx_line"],
                        "pc": None, "source_file": row["source_file"], "source_line": row["source_line"]})
        return pa.Table.from_pylist(out, schema=INSTRUCTION_INFO)

    def kernel_facts(self, kernel: str) -> dict:
        return {}

    def kernel_notes(self, kernel: str) -> list[str]:
        return []
