"""The package's import graph: modules, edges, and its circles (strongly connected components).

Every ``import`` is read from the source (ast), module-level or inside a function, so a late import
counts like any other.  ``tests/test_architecture.py`` uses :func:`import_graph` and :func:`circles`.

    python scripts/import_graph.py            # modules, edges, circles
    python scripts/import_graph.py --edges    # also every edge
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "traceconf"


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted name → file of every module of the package (a package is its ``__init__``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The package modules that ``module`` (its file ``path``) imports, each to the deepest module named:
    ``from traceconf.emulate import taint`` imports ``traceconf.emulate.taint``."""
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
            submodules = {f"{base}.{alias.name}" for alias in node.names} & known
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(base)
    return {name for name in found if name in known and name != module}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module → the package modules it imports."""
    found = modules(package)
    return {name: imports(path, name, set(found)) for name, path in found.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself): each is a
    circle of imports.  Tarjan's algorithm, iterative."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    out.append(sorted(component))
    return sorted(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="print every edge")
    args = parser.parse_args()
    graph = import_graph()
    found = circles(graph)
    print(f"modules: {len(graph)}")
    print(f"edges: {sum(len(targets) for targets in graph.values())}")
    print(f"strongly connected components of more than one module (circles): {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    if args.edges:
        for name in sorted(graph):
            for target in sorted(graph[name]):
                print(f"{name} -> {target}")


if __name__ == "__main__":
    main()
