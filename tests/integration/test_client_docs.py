"""Every Python example in docs/client.md runs, as written, against a live cluster.

The examples name their brokers `127.0.0.1:9092`; each block is run as its own program
(a fresh interpreter, so a block cannot lean on another's names) with the test
cluster's address put in its place. The doc promises a topic `events`; it is created
first, as the doc tells a reader to.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import BrokerFactory, create, start_cluster

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
PLACEHOLDER = "127.0.0.1:9092"
# One example may import pyarrow and wait a second for records that do not come.
EXAMPLE_DEADLINE_S = 90.0

_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
_ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b")


def python_examples(text: str) -> list[tuple[int, str]]:
    """(line number of the opening fence, code) of every ```python block."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def test_examples_are_found_and_compile() -> None:
    examples = python_examples(DOC.read_text(encoding="utf-8"))
    assert len(examples) >= 8
    for line, code in examples:
        compile(code, f"{DOC.name}:{line}", "exec")
        assert set(_ADDRESS.findall(code)) <= {PLACEHOLDER}, f"line {line}: another address"


@pytest.mark.slow
def test_every_example_runs_against_a_cluster(brokers: BrokerFactory, tmp_path: Path) -> None:
    start_cluster(brokers)
    asyncio.run(create(brokers.bootstrap, "events", partitions=3))
    bootstrap = ",".join(f"{host}:{port}" for host, port in brokers.bootstrap)
    failures = []
    for line, code in python_examples(DOC.read_text(encoding="utf-8")):
        script = tmp_path / f"client_md_line_{line}.py"
        script.write_text(code.replace(PLACEHOLDER, bootstrap), encoding="utf-8")
        try:
            run = subprocess.run(
                [sys.executable, str(script)],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=EXAMPLE_DEADLINE_S,
            )
        except subprocess.TimeoutExpired:
            failures.append(f"line {line}: still running after {EXAMPLE_DEADLINE_S:.0f} s")
            continue
        if run.returncode != 0:
            failures.append(f"line {line}: exit {run.returncode}\n{run.stderr[-2000:]}")
    assert not failures, "\n\n".join(failures)
