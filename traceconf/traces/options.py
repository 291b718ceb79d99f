"""Options every trace reader takes, and the one place bad input is either raised or counted."""

from __future__ import annotations

from dataclasses import dataclass, field

from traceconf.errors import InputError
from traceconf.traces.source import Progress


@dataclass
class ReadOptions:
    skip_bad: bool = False
    progress: Progress | None = None
    chunk_executions: int = 65536
    memory_limit: int | None = None     # bytes this process may hold while reading (None: no check)

    def __post_init__(self) -> None:
        if self.chunk_executions < 1:
            raise ValueError("chunk_executions must be at least 1")


@dataclass(order=True)
class Problem:
    """A malformed line: raised as an InputError, or counted when skipping bad lines."""

    line: int
    message: str = field(default="", compare=False)
    column: int | None = field(default=None, compare=False)
    source_line: str | None = field(default=None, compare=False)

    def error(self, file: str) -> InputError:
        return InputError(self.message, file, self.line, self.column, self.source_line)
