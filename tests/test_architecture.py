"""The import graph runs one way: sources → emulation → engine → analyses → reports → commands → CLI.

Every ``import`` of the package, module-level or inside a function, is read
from the source (ast), so a late import cannot hide a dependency that runs
against the data flow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "traceconf"

#: Layer of each module prefix (the longest matching prefix wins); a module may import its own layer or lower.
LAYERS = {
    "traceconf.errors": 0, "traceconf.numbers": 0, "traceconf.inputs": 0, "traceconf.machine": 0, "traceconf.kinds": 0, "traceconf.tomlfile": 0, "traceconf.schemas": 0, "traceconf.names": 0,
    "traceconf.rules": 1, "traceconf.launches": 1, "traceconf.accesses": 1, "traceconf.ptx": 1, "traceconf.traces": 1,
    "traceconf.sass.opcodes": 1, "traceconf.sass.listing": 1, "traceconf.sass.binary": 1,
    "traceconf.sass.toolchain": 1,
    "traceconf.outputs": 0, "traceconf.tools": 0,
    "traceconf.emulate": 2, "traceconf.sass": 2,
    "traceconf.engine": 3, "traceconf.reference": 3,
    "traceconf.pipeline": 4, "traceconf.sass.analyze": 4, "traceconf.sass.rewrites": 2,
    "traceconf.analyses": 5, "traceconf.distributed": 5, "traceconf.cluster": 5,
    "traceconf.report": 6,
    "traceconf.api": 7, "traceconf.commands": 7,
    "traceconf.cli": 8, "traceconf.__main__": 8,
}


def layer(module: str) -> int | None:
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name != "traceconf":                       # the package root re-exports the API
            out.append((name, path))
    return out


def imports(path: Path, module: str) -> set[str]:
    found = set()
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if not (PACKAGE.parent / Path(*base.split("."))).is_dir():    # a package is its modules' business
                found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if layer(f"{base}.{alias.name}") is not None
                         and (PACKAGE.parent / Path(*f"{base}.{alias.name}".split("."))).with_suffix(".py").exists())
    return {name for name in found if name.startswith("traceconf")}


def test_every_module_has_a_layer():
    assert [name for name, _ in modules() if layer(name) is None] == []


@pytest.mark.parametrize("name, path", modules(), ids=[name for name, _ in modules()])
def test_imports_run_with_the_data_flow(name, path):
    mine = layer(name)
    against = sorted(target for target in imports(path, name)
                     if target != "traceconf" and (layer(target) or 0) > mine)
    assert against == [], f"{name} (layer {mine}) imports later stages: {against}"


def test_the_library_never_imports_the_cli():
    for name, path in modules():
        if not name.startswith(("traceconf.commands", "traceconf.cli", "traceconf.__main__")):
            assert not {t for t in imports(path, name) if t.startswith(("traceconf.cli", "traceconf.commands"))}, name


def test_the_checker_sees_late_imports(tmp_path):
    source = tmp_path / "late.py"
    source.write_text("def f():\n    from traceconf.commands.analyze import fail\n")
    assert "traceconf.commands.analyze" in imports(source, "traceconf.late")
