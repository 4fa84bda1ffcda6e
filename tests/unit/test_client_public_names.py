"""The client's public names: what `spark_replica.client` exports is what its users import.

The Spark connector imports the client only through the package's `__all__`, never a
module inside it; and no two client modules import each other, directly or in a longer
loop, counting the imports made only for type checking.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import spark_replica.client as client

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "spark_replica" / "client"
CONNECTOR_DIR = ROOT / "connectors" / "spark"


def _imports(path: Path, package: str) -> list[tuple[str, list[str]]]:
    """(module, names) of every `from ... import` in a file, relative ones made absolute."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{module}" if module else base
            found.append((module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def test_all_lists_every_public_name_once_and_nothing_else() -> None:
    exported = client.__all__
    assert len(exported) == len(set(exported))
    assert all(hasattr(client, name) for name in exported)
    public = {
        name
        for name, value in vars(client).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(exported)


def test_the_connector_imports_only_the_clients_public_names() -> None:
    for path in sorted(CONNECTOR_DIR.rglob("*.py")):
        for module, names in _imports(path, "connectors.spark"):
            if module.startswith("spark_replica.client"):
                assert module == "spark_replica.client", f"{path.name} imports {module}"
                private = set(names) - set(client.__all__)
                assert not private, f"{path.name} imports {sorted(private)}"


def test_no_import_cycles_in_the_client() -> None:
    graph: dict[str, set[str]] = {}
    for path in sorted(CLIENT_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        name = f"spark_replica.client.{path.stem}"
        graph[name] = {
            module
            for module, _ in _imports(path, "spark_replica.client")
            if module.startswith("spark_replica.client.") and module != name
        }

    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> None:
        assert module not in trail, "import cycle: " + " -> ".join([*trail, module])
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, [*trail, module])
        done.add(module)

    for module in graph:
        visit(module, [])
