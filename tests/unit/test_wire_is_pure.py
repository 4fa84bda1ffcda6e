"""spark_replica/wire is pure codecs: nothing it imports, at any depth, does I/O.

The walk follows every import of the package's modules, and of the project modules they
reach, at any nesting (a function's local import counts too, and so do imports made for
the type checker only), and the parent packages of each module it reaches, except the
top package (spark_replica/__init__.py re-exports the client's public names for users,
which the wire's own imports never need). A module of the standard library or a
dependency that talks to sockets, processes, threads, files or ZooKeeper anywhere on the
way fails the test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = ("spark_replica", "brokerd", "connectors")
DOES_IO = {
    "asyncio",
    "concurrent",
    "http",
    "kazoo",
    "multiprocessing",
    "os",
    "pathlib",
    "selectors",
    "shutil",
    "signal",
    "socket",
    "socketserver",
    "ssl",
    "subprocess",
    "tempfile",
    "threading",
    "urllib",
}


def module_file(name: str) -> Path | None:
    """The source file of a first-party module (a package's __init__), if there is one."""
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_names(path: Path, package: str) -> set[str]:
    """Every module `path` imports, relative imports resolved against `package`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, node.module] if node.module else parts)
            else:
                base = node.module or ""
            names.add(base)
            # `from package import module` names a module too.
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def reachable_imports(start: str) -> dict[str, str]:
    """Every module imported from the modules under `start`, transitively through the
    project's own modules and their packages: imported name -> the module importing it."""
    pending = [
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in ROOT.joinpath(*start.split(".")).rglob("*.py")
    ]
    seen: set[str] = set()
    found: dict[str, str] = {}
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        path = module_file(module)
        if path is None:
            continue
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for name in imported_names(path, package):
            found.setdefault(name, module)
            if name.split(".")[0] in FIRST_PARTY:
                # Importing a module runs its parent packages' __init__ too, but for the
                # top package's, which re-exports the client's public names.
                parts = name.split(".")
                pending.extend(".".join(parts[:end]) for end in range(2, len(parts) + 1))
    return found


def test_the_walk_sees_local_and_relative_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from . import sibling\ndef f():\n    import socket\n")
    assert imported_names(source, "pkg.sub") == {"pkg.sub", "pkg.sub.sibling", "socket"}


def test_the_wire_package_imports_nothing_that_does_io() -> None:
    found = reachable_imports("spark_replica.wire")
    assert "spark_replica.wire.schema" in found  # the walk did reach the package
    doing_io = {name: by for name, by in found.items() if name.split(".")[0] in DOES_IO}
    assert not doing_io, f"modules doing I/O imported (name: by module): {doing_io}"


@pytest.mark.parametrize("package", ["brokerd", "spark_replica.client"])
def test_io_packages_stay_outside_the_wire(package: str) -> None:
    found = reachable_imports("spark_replica.wire")
    assert not [name for name in found if name == package or name.startswith(package + ".")]
