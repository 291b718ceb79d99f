"""The partitioned results folder (``OUT/<input>/<kernel>.parquet``) and its manifest, and the combination of
one kernel's shares."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from traceconf.distributed.units import Unit, digest, hidden
from traceconf.errors import InputError
from traceconf.outputs import atomic_output, check_writable, file_digest, partition_intact, read_manifest, write_text
from traceconf.pipeline import KernelAnalysis, KernelFailure

MANIFEST = "_manifest.json"
_SLUG = re.compile(r"[^A-Za-z0-9_.+-]+")


def combine_analyses(parts: list[KernelAnalysis]) -> KernelAnalysis:
    """One kernel's analysis from the analyses of its shares: exact sums, instructions united."""
    from traceconf.engine import combine

    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    instructions = pa.concat_tables([p.instructions for p in parts])
    seen, keep = set(), []
    for i, ident in enumerate(instructions.column("instruction").to_pylist()):
        if ident not in seen:
            seen.add(ident)
            keep.append(i)
    instructions = instructions.take(pa.array(keep, pa.int64())).sort_by("instruction")
    notes = list(dict.fromkeys(note for p in parts for note in p.notes))
    model_notes: dict[str, dict[int, str]] = {}
    for part in parts:
        for device, noted in part.model_notes.items():
            model_notes.setdefault(device, {}).update(noted)
    return KernelAnalysis(kernel=first.kernel, input_path=first.input_path, input_format=first.input_format,
                          launch=first.launch, results=combine([p.results for p in parts]),
                          instructions=instructions, unresolved=[u for p in parts for u in p.unresolved],
                          notes=notes, model_notes=model_notes)


def _slug(text: str, limit: int = 80) -> str:
    readable = _SLUG.sub("_", text).strip("_.")[-limit:] or "x"
    return f"{readable}-{digest(text)}"


def partition_path(output: Path, source: str, kernel: str) -> Path:
    """Where the results of one (input, kernel) go: ``OUT/<input slug>/<kernel slug>.parquet``."""
    return output / _slug(source) / f"{_slug(kernel)}.parquet"


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"cannot write results: {error.strerror or error}", str(folder)) from None


class Dataset:
    """The partitioned results folder and its manifest."""

    def __init__(self, output: Path, devices: list[str], resume: bool):
        self.output = output
        self.devices = devices
        self.units: dict[str, dict] = {}
        self.rows: dict[str, int] = {}      # partition -> rows written and SHA-256, checked on --resume
        self.digests: dict[str, str] = {}
        if (output / MANIFEST).exists():          # a folder or FIFO there would stop the run only at its end
            check_writable(output / MANIFEST)
        old = read_manifest(output / MANIFEST, {"devices": list, "units": list}, "units",
                            {"key": str, "status": str, "partitions": list}) if resume else None
        if old is not None and old["devices"] == devices:  # other devices: other columns, nothing to reuse
            self.units = {u["key"]: u for u in old["units"] if u["status"] == "done"}

    def written(self, unit: Unit) -> bool:
        """Whether a previous run wrote this unit's results and they are still there, from the same input."""
        entry = self.units.get(unit.key)
        if entry is None or entry.get("stamp") != unit.stamp:
            return False
        rows, digests = (entry.get(key) if isinstance(entry.get(key), dict) else {} for key in ("rows", "digests"))
        kernels = entry.get("kernels")
        if not isinstance(kernels, list) or kernels and not entry["partitions"]:   # its rows must be somewhere
            return False
        # every partition vouched for by its row count and digest: a manifest that lost either for a
        # partition (edited, damaged) cannot say the file is the one it wrote
        return all(isinstance(p, str) and isinstance(rows.get(p), int) and isinstance(digests.get(p), str)
                   and partition_intact(self.output / p, rows[p], digests[p]) for p in entry["partitions"])

    def write(self, analyses: list[KernelAnalysis]) -> list[str]:
        from traceconf.analyses.results import results_table

        paths = []
        for analysis in analyses:
            path = partition_path(self.output, analysis.input_path, analysis.kernel)
            table = results_table([analysis], self.devices)
            _make_folder(path.parent)
            with atomic_output(path) as temporary:
                pq.write_table(table, temporary)
            paths.append(str(path.relative_to(self.output)))
            self.rows[paths[-1]] = table.num_rows
            self.digests[paths[-1]] = file_digest(path)
        return paths

    def record(self, unit: Unit, status: str, partitions: list[str] | None = None, reason: str | None = None,
               kernels: list[str] | None = None) -> None:
        self.units[unit.key] = {"key": unit.key, "source": unit.source, "path": unit.path, "kind": unit.kind,
                                "kernel": unit.kernel, "part": list(unit.part) if unit.part else None,
                                "stamp": unit.stamp, "status": status, "partitions": partitions or [],
                                "kernels": kernels or [], "reason": reason}

    def save(self, failures: list[KernelFailure]) -> None:
        units = list(self.units.values())
        missing = [{"source": u["source"], "path": u["path"], "kernel": u["kernel"], "reason": u["reason"]}
                   for u in units if u["status"] != "done"]
        missing += [{"source": f.error.file, "path": f.error.file, "kernel": f.kernel or None, "reason": f.line()}
                    for f in failures if not any(f.line() == m["reason"] for m in missing)]
        body = {"format": "traceconf results dataset 1", "devices": self.devices,
                "partitions": "<input slug>/<kernel slug>.parquet: RESULT_ROWS of one kernel of one input",
                "units": units, "missing": missing}
        _make_folder(self.output)
        write_text(self.output / MANIFEST, json.dumps(body, indent=1))


def read_dataset(output: str | Path) -> pa.Table:
    """Every partition of a results folder as one RESULT_ROWS table (hidden and ``_`` files skipped)."""
    import pyarrow.dataset as ds

    from traceconf.schemas import RESULT_ROWS

    files = sorted(str(p) for p in Path(output).rglob("*.parquet") if not hidden(p.relative_to(output)))
    if not files:
        return RESULT_ROWS.empty_table()
    return ds.dataset(files, format="parquet", schema=RESULT_ROWS).to_table()
