"""What the analysis needs of a program, whatever its instruction set: the one interface of the program layer.

A program is a source the emulator can run (PTX as written: :mod:`.ptx`; SASS from a listing, a CUDA binary
or PTX assembled by ptxas: :mod:`.sass`).  :func:`traceconf.pipeline.analyze_kernel` runs any of them the
same way: it resolves the launch against :meth:`Program.declaration`, emulates with :meth:`Program.emulate`
and counts the accesses under every rule set.  Another instruction set is one more module that implements
this protocol (and one line of :data:`traceconf.programs.PROGRAM_FORMATS`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from traceconf.emulate.driver import EmulationResult
    from traceconf.emulate.launch import Launch


class Program(Protocol):
    path: str              # the input file (messages name it)
    input_format: str      # what the input held, for the reports ("ptx", "sass")
    notes: list[str]       # said of every kernel (the level chosen and why)

    def kernel_names(self) -> list[str]:
        """The kernels ``--kernel`` selects from, in file order."""

    def declaration(self, kernel: str) -> dict:
        """What a launch is resolved against: ``kernel``, ``params`` (``name``, ``bytes`` each), ``reqntid``,
        ``maxntid``."""

    def static_shared_bytes(self, kernel: str) -> int:
        """Shared bytes the kernel declares (a device's limit counts them with --dynamic-smem)."""

    def unsupported(self, rules) -> str | None:
        """Why ``rules`` cannot count this program at all (None: it can)."""

    def emulate(self, kernel: str, launch: Launch, progress: Callable | None, consume: Callable) -> EmulationResult:
        """One resolved launch of ``kernel``, its accesses streamed into ``consume``."""

    def uncounted(self, kernel: str) -> list[dict]:
        """An unresolved entry (``instruction``, ``ptx``, ``reason``, where) for each instruction that is
        shared-memory work but no counted access (TMA copies, wgmma operands)."""

    def instruction_info(self, kernel: str, ids: list[int], kinds: dict[int, str],
                         widths: dict[int, int]) -> pa.Table:
        """INSTRUCTION_INFO of the kernel's shared-memory instructions and of ``ids``; ``kinds`` and
        ``widths`` as the emulation saw them win over the static ones."""

    def kernel_facts(self, kernel: str) -> dict:
        """Launch facts the program adds (the SASS level and architecture)."""

    def kernel_notes(self, kernel: str) -> list[str]:
        """Notes about one kernel the program adds (what ptxas rewrote)."""
