"""The import graph runs one way and has no circle: sources → emulation → programs → engine → per-kernel
analysis → analyses → reports → commands → CLI.

Every ``import`` of the package, module-level or inside a function, is read from the source (ast,
``scripts/import_graph.py``), so a late import cannot hide a dependency that runs against the data flow.
Each stage has a layer of its own: no two stages share one to let a circle through.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
import_graph = importlib.util.module_from_spec(_spec)
sys.modules["import_graph"] = import_graph
_spec.loader.exec_module(import_graph)

#: Layer of each module prefix (the longest matching prefix wins); a module may import its own layer or lower.
#: A program (PTX as written, SASS) names the emulator that runs it, so programs sit just above emulation;
#: the data flows source → program → emulation → ACCESSES.
LAYERS = {
    # shared facts and plumbing
    "traceconf.errors": 0, "traceconf.kinds": 0, "traceconf.tomlfile": 0, "traceconf.schemas": 0,
    "traceconf.names": 0, "traceconf.outputs": 0, "traceconf.tools": 0, "traceconf.sources": 0,
    "traceconf.numbers": 0, "traceconf.inputs": 0, "traceconf.machine": 0, "traceconf.grouping": 0,
    # sources: inputs read into tables, rule sets, the ACCESSES format
    "traceconf.rules": 1, "traceconf.launches": 1, "traceconf.accesses": 1, "traceconf.ptx": 1,
    "traceconf.traces": 1, "traceconf.sass.opcodes": 1, "traceconf.sass.listing": 1, "traceconf.sass.binary": 1,
    "traceconf.sass.toolchain": 1, "traceconf.sass.containers": 1,
    # emulation (both instruction sets) and the launch it runs
    "traceconf.emulate": 2, "traceconf.sass": 2,
    # programs: an input at its level, with its emulator
    "traceconf.programs": 3,
    # the engine and its reference
    "traceconf.engine": 4, "traceconf.lanemasks": 4, "traceconf.reference": 4,
    # one analysis per kernel, any input
    "traceconf.pipeline": 5,
    # results: tables, gate, lookups, comparisons; many inputs
    "traceconf.analyses": 6, "traceconf.distributed": 6, "traceconf.cluster": 6,
    "traceconf.report": 7,
    "traceconf.api": 8, "traceconf.commands": 8, "traceconf.pictures": 8, "traceconf.pytest_plugin": 8,
    # Triton: compiling and launch records are sources; the one-call analysis is an API
    "traceconf.triton": 8, "traceconf.triton.compile": 1, "traceconf.triton.records": 1,
    "traceconf.triton.structured_log": 1,
    "traceconf.cli": 9, "traceconf.__main__": 9, "traceconf.startup": 9,
}


def layer(module: str) -> int | None:
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


GRAPH = import_graph.import_graph()
MODULES = sorted(name for name in GRAPH if name != "traceconf")    # the package root re-exports the API


def test_every_module_has_a_layer():
    assert [name for name in MODULES if layer(name) is None] == []


def test_the_import_graph_has_no_circle():
    assert import_graph.circles(GRAPH) == []


@pytest.mark.parametrize("name", MODULES)
def test_imports_run_with_the_data_flow(name):
    mine = layer(name)
    against = sorted(target for target in GRAPH[name] if (layer(target) or 0) > mine)
    assert against == [], f"{name} (layer {mine}) imports later stages: {against}"


def test_the_library_never_imports_the_cli():
    for name in MODULES:
        if not name.startswith(("traceconf.commands", "traceconf.cli", "traceconf.__main__")):
            assert not {t for t in GRAPH[name] if t.startswith(("traceconf.cli", "traceconf.commands"))}, name


def test_the_checker_sees_late_imports(tmp_path):
    source = tmp_path / "late.py"
    source.write_text("def f():\n    from traceconf.commands.analyze import fail\n")
    known = set(GRAPH)
    assert "traceconf.commands.analyze" in import_graph.imports(source, "traceconf.late", known)


def test_the_circle_finder_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert import_graph.circles(graph) == [["a", "b", "c"], ["e"]]


def test_each_stage_has_its_own_layer():
    """Stages are not merged into one layer to let an import between them through."""
    stages = ["traceconf.ptx", "traceconf.emulate", "traceconf.programs", "traceconf.engine", "traceconf.pipeline",
              "traceconf.analyses", "traceconf.report", "traceconf.commands", "traceconf.cli"]
    assert [layer(stage) for stage in stages] == sorted({layer(stage) for stage in stages})
