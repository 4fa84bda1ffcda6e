"""The Spark connector is a layer on the client: it holds no wire-protocol code of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CONNECTORS = Path(__file__).resolve().parents[2] / "connectors"
FORBIDDEN = "spark_replica.wire.native"


def protocol_imports(source: str) -> list[str]:
    """The modules under spark_replica.wire.native that `source` imports, at any depth."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found += [name for name in names if name == FORBIDDEN or name.startswith(FORBIDDEN + ".")]
    return found


def test_the_check_sees_every_form_of_import() -> None:
    source = (
        "import spark_replica.wire.native.fetch\n"
        "from spark_replica.wire.native import produce\n"
        "def f():\n    from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP\n"
        "import spark_replica.protocolish\n"
        "from spark_replica import client\n"
    )
    assert protocol_imports(source) == [
        "spark_replica.wire.native.fetch",
        "spark_replica.wire.native",
        "spark_replica.wire.native.produce",
        "spark_replica.wire.native.list_offsets",
        "spark_replica.wire.native.list_offsets.LATEST_TIMESTAMP",
    ]


@pytest.mark.parametrize(
    "module", sorted(CONNECTORS.rglob("*.py")), ids=lambda p: str(p.relative_to(CONNECTORS))
)
def test_no_connector_module_imports_the_wire_protocol(module: Path) -> None:
    assert protocol_imports(module.read_text()) == [], (
        f"{module.relative_to(CONNECTORS.parent)} imports the wire protocol: "
        "use the client (spark_replica.client) instead"
    )
