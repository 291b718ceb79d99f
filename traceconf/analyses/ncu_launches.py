"""The launches an Nsight Compute report profiled: kernel, grid, block, dynamic shared memory per launch.

The Source page (``--page source``) names each table's kernel but not its launch; these come from:

* ``ncu -i REP --page details --csv`` (``--print-details all`` too): one row per launch and metric, the launch's
  ``ID``, ``Kernel Name``, ``Grid Size``, ``Block Size`` columns, and the Launch Statistics section's
  ``Dynamic Shared Memory Per Block`` row (``Metric Unit`` ``byte/block``, or a scaled unit);
* ``ncu -i REP --page raw --csv``: one row per launch, the same columns, ``launch__shared_mem_per_block_dynamic``
  (its unit in the units row that follows the header);
* a ``.ncu-rep`` itself, through Nsight Compute's own Python module ``ncu_report`` (``extras/python`` of the
  Nsight Compute install) where it can be imported: the ``launch__grid_dim_*``, ``launch__block_dim_*`` and
  ``launch__shared_mem_per_block_dynamic`` metrics of each launch.

:func:`pair_launches` gives each Source-page table its launch: the k-th table of a kernel is the k-th launch of
that kernel (ncu prints launches in ID order on every page).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from traceconf.errors import InputError

DETAILS_DYNAMIC = "Dynamic Shared Memory Per Block"
RAW_DYNAMIC = "launch__shared_mem_per_block_dynamic"
HOW_TO_EXPORT = "ncu -i REPORT.ncu-rep --page details --csv > launches.csv"


@dataclass(frozen=True)
class ProfiledLaunch:
    """One launch of a report: what compare-ncu needs to predict it (None: the report does not say)."""

    id: str | None
    kernel: str
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    dynamic_smem: int | None
    file: str                            # where the report says it, for messages
    line: int | None = None
    alike: tuple[str, ...] = ()          # IDs of launches a table may equally be (they differ only in what the
    #                                      command line gives)

    def ids(self) -> tuple[str, ...]:
        """The report's IDs this launch stands for: its own and those :attr:`alike` (a launch two launch pages
        give, the details and the raw page, once)."""
        return tuple(dict.fromkeys(i for i in (self.id, *self.alike) if i is not None))

    def warps(self, warp_size: int) -> int | None:
        """Warps the launch ran on a device of ``warp_size`` lanes (None: grid or block unknown)."""
        if self.grid is None or self.block is None:
            return None
        return math.prod(self.grid) * -(-math.prod(self.block) // warp_size)

    def describe(self) -> str:
        dims = lambda d: "×".join(map(str, d)) if d else "?"    # noqa: E731
        smem = "?" if self.dynamic_smem is None else f"{self.dynamic_smem:,}"
        return f"ID {self.id}: grid {dims(self.grid)}, block {dims(self.block)}, dynamic shared {smem} bytes"


@dataclass
class LaunchTable:
    """The launch table of a raw or details page CSV: rows after its ``Kernel Name`` header, numbered."""

    path: str
    header_line: int
    columns: dict[str, int]
    rows: list[tuple[int, list[str]]]

    def cell(self, row: list[str], name: str) -> str | None:
        index = self.columns.get(name)
        return row[index] if index is not None and index < len(row) else None


def csv_rows(path: str | Path, what: str | None = None) -> list[tuple[int, list[str]]]:
    """The rows of an Nsight Compute CSV export, each with its line number; a file that cannot be read or that
    the csv module refuses (a field over its size limit) is an error naming the file (and line), ``what``
    naming the page."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read{' ' + what if what else ''}: {exc.strerror or exc}", file=str(path)) from None
    reader = csv.reader(text.splitlines())
    rows = []
    try:
        for row in reader:
            rows.append((reader.line_num, row))
    except csv.Error as error:
        raise InputError(f"not a CSV export: {error}", file=str(path), line=reader.line_num) from None
    return rows


def read_launch_table(path: str | Path, what: str) -> LaunchTable | None:
    """The rows of ``ncu --page raw|details --csv`` under the header holding ``Kernel Name``; None if the file
    has no such header (``what`` names the page in the error for an unreadable file)."""
    # ncu's own "==PROF==" / "==WARNING==" lines end up in the file when stdout was redirected whole
    numbered = [(n, row) for n, row in csv_rows(path, what) if row and not row[0].startswith("==")]
    at = next((i for i, (_, row) in enumerate(numbered) if "Kernel Name" in [c.strip() for c in row]), None)
    if at is None:
        return None
    header_line, header = numbered[at]
    return LaunchTable(str(path), header_line, {name.strip(): i for i, name in enumerate(header)},
                       numbered[at + 1:])


def is_ncu_rep(path: str | Path) -> bool:
    """Whether a REPORT is Nsight Compute's own file (read through ``ncu_report``) rather than a CSV export."""
    return str(path).lower().endswith(".ncu-rep")


def is_source_page(path: str | Path) -> bool:
    """Whether a REPORT is a Source page (a CSV with a ``Source`` column beside the shared wavefronts) rather than
    a launch page or a ``.ncu-rep``; a CSV is decided from the first rows that name columns."""
    if is_ncu_rep(path):
        return False
    try:
        with open(path, newline="", errors="replace") as handle:
            for number, row in enumerate(csv.reader(handle)):
                names = {c.strip() for c in row}
                if "Source" in names:
                    return True
                if "Kernel Name" in names and names & {"ID", "Grid Size", "Block Size"}:   # a launch page
                    return False
                if number > 50:
                    break
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    except csv.Error:
        pass           # the Source-page reader says where
    return True        # neither: read as a Source page, whose reader says what a Source page needs


def launch_dims(text: str | None) -> tuple[int, int, int] | None:
    numbers = [int(n) for n in re.findall(r"\d+", (text or "").replace(",", ""))]
    return (tuple(numbers) + (1, 1, 1))[:3] if 1 <= len(numbers) <= 3 else None


def read_bytes(value: str | None, unit: str | None, path: str, line: int, column: int, what: str) -> int | None:
    """A byte count as ncu prints it in bytes (``1,536`` byte/block); None when empty or n/a.  A scaled unit
    (``1.54`` Kbyte/block) is rounded by ncu, so it cannot give the exact size: the error says how to export."""
    cleaned = (value or "").strip().replace(",", "")
    if not cleaned or cleaned.lower() in ("-", "n/a", "nan"):
        return None
    if (unit or "byte").strip().split("/")[0].lower() != "byte":
        raise InputError(f"{what}: {value.strip()} {unit.strip()} is rounded, not a byte count: export with "
                         "--print-units base", file=path, line=line, column=column)
    if not cleaned.isdigit():
        raise InputError(f"{what}: expected a byte count, got {value.strip()!r}", file=path, line=line,
                         column=column)
    return int(cleaned)


def read_launch_csv(path: str | Path) -> list[ProfiledLaunch]:
    """Every launch of ``ncu -i REP --page details --csv`` or ``--page raw --csv``, in the file's order."""
    table = read_launch_table(path, "the launch page")
    if table is None or not {"Grid Size", "Block Size"} & set(table.columns):
        raise InputError("no launch table (a header row with Kernel Name, Grid Size and Block Size): export with "
                         f"{HOW_TO_EXPORT} (or --page raw --csv)", file=str(path), line=1)
    details = "Metric Name" in table.columns and "Metric Value" in table.columns
    units = None
    found: dict[tuple, dict] = {}
    for line, row in table.rows:
        kernel = (table.cell(row, "Kernel Name") or "").strip()
        if not kernel:
            if units is None and not found:   # raw page: the units row under the header
                units = row
            continue
        launch = found.setdefault((table.cell(row, "ID"), kernel), {
            "id": table.cell(row, "ID"), "kernel": kernel, "grid": launch_dims(table.cell(row, "Grid Size")),
            "block": launch_dims(table.cell(row, "Block Size")), "dynamic_smem": None, "file": table.path, "line": line})
        if details:
            if (table.cell(row, "Metric Name") or "").strip() == DETAILS_DYNAMIC:
                launch["dynamic_smem"] = read_bytes(table.cell(row, "Metric Value"), table.cell(row, "Metric Unit"),
                                                    table.path, line, table.columns["Metric Value"] + 1,
                                                    DETAILS_DYNAMIC)
        elif RAW_DYNAMIC in table.columns:
            column = table.columns[RAW_DYNAMIC]
            unit = units[column] if units is not None and column < len(units) else None
            launch["dynamic_smem"] = read_bytes(table.cell(row, RAW_DYNAMIC), unit, table.path, line, column + 1,
                                                RAW_DYNAMIC)
    if not found:
        raise InputError("the launch table lists no launch", file=str(path), line=table.header_line)
    return [ProfiledLaunch(**launch) for launch in found.values()]


def read_ncu_rep(path: str | Path) -> list[ProfiledLaunch]:
    """Every launch of a ``.ncu-rep``, read through Nsight Compute's Python module ``ncu_report``."""
    try:
        import ncu_report
    except ImportError:
        raise InputError("reading a .ncu-rep needs Nsight Compute's Python module ncu_report: add its folder to "
                         "PYTHONPATH (NSIGHT_COMPUTE/extras/python), or give its launch page instead: "
                         f"{HOW_TO_EXPORT.replace('REPORT.ncu-rep', str(path))}", file=str(path)) from None
    try:
        report = ncu_report.load_report(str(path))
    except Exception as error:   # the module's own errors (a corrupt or foreign file) are the input's
        raise InputError(f"ncu_report cannot load it: {error}", file=str(path)) from None
    out = []
    for r in range(report.num_ranges()):
        launches = report.range_by_idx(r)
        for a in range(launches.num_actions()):
            action = launches.action_by_idx(a)

            def metric(name: str) -> int | None:
                found = action.metric_by_name(name)
                return None if found is None else int(found.as_uint64())

            dims = lambda prefix: tuple(metric(f"{prefix}_{axis}") for axis in "xyz")   # noqa: E731
            grid, block = dims("launch__grid_dim"), dims("launch__block_dim")
            name = action.name(ncu_report.IAction.NameBase_MANGLED)
            # the report's own ID: ncu_report gives an action no ID of its own (IAction: name, metrics, source),
            # and ncu's exports number the results in this order, ranges then actions, from 0 (the transpose
            # report's pages: tests/data/hw/ncu_reports)
            out.append(ProfiledLaunch(str(len(out)), name, None if None in grid else grid,
                                      None if None in block else block, metric(RAW_DYNAMIC), str(path)))
    if not out:
        raise InputError("the report holds no profiled launch", file=str(path))
    return out


def read_launches(path: str | Path) -> list[ProfiledLaunch]:
    """A launch page CSV or a ``.ncu-rep``."""
    return read_ncu_rep(path) if is_ncu_rep(path) else read_launch_csv(path)


#: What to do when a kernel's launch pages and its Source-page tables cannot be paired.
PAIRING_ADVICE = ("give the launch's --grid/--block/--dynamic-smem, or export the Source page and the launch page of "
                  "the same launches (ncu -i REPORT --page source --csv --print-source sass --launch-skip N "
                  "--launch-count 1)")


def pair_launches(tables: list, launches: list[ProfiledLaunch], kernel_of: Callable[[str], str | None],
                  warp_size: int, given: frozenset[str] = frozenset(), held_by: str = "the launch pages hold",
                  advice: str = PAIRING_ADVICE) -> list[ProfiledLaunch | None]:
    """The launch of each Source-page table (``MeasuredKernel``; None: no launch page has its kernel, or the input
    does not).  ``kernel_of``: the input's kernel a name in the report means (None: none), one rule for the
    tables' names and the launches' (a Source page may name a kernel by its function, a .ncu-rep mangled).

    Among the launches of the table's kernel, those that ran as many warps as the table's first instruction
    executed (every warp executes it once) are its candidates; one candidate, or several that differ only in
    what the command line gives (``given``: grid, block, dynamic_smem), is the table's; otherwise the k-th
    table of the kernel is the k-th launch, when the two counts are equal; otherwise an error names what holds
    the launches (``held_by``, with its verb) and what to do (``advice``)."""
    differing = [key for key in ("grid", "block", "dynamic_smem") if key not in given]
    out = []
    for index, table in enumerate(tables):
        kernel = kernel_of(table.name) if table.name is not None else None
        if kernel is None:
            out.append(None)
            continue
        mine = [launch for launch in launches if kernel_of(launch.kernel) == kernel]
        candidates = [m for m in mine if table.warps is None or m.warps(warp_size) in (None, table.warps)]
        same = [t for t in tables if t.name is not None and kernel_of(t.name) == kernel]
        if len({tuple(getattr(m, key) for key in differing) for m in candidates}) == 1:
            # launches the table may be: all of them, named
            out.append(replace(candidates[0], alike=tuple(m.id for m in candidates[1:] if m.id is not None)))
        elif candidates and len(mine) == len(same):
            out.append(mine[sum(1 for t in tables[:index] if any(t is s for s in same))])
        elif mine:
            ran = f" of {table.warps:,} warps" if table.warps is not None else ""
            raise InputError(f"{held_by} {len(candidates) or 'no'} launch(es){ran} of {table.name} "
                             f"({'; '.join(m.describe() for m in (candidates or mine)[:4])}), the Source pages "
                             f"{len(same)} table(s) of it: {advice}", file=mine[0].file)
        else:
            out.append(None)
    return out
