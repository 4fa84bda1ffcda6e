"""The shell blocks README.md and docs/*.md mark runnable (`<!-- runnable -->` on the line
before the fence) run as written, in page order, against a fresh cluster, each exiting 0.

The blocks assume what the README says: `replog up` was run in the current directory,
so their commands find the cluster in ./.replog with no address. The test starts that
cluster on a free --port-base (tests/support.py), which the blocks never see, and stops
it by the PIDs it recorded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_replica.tools.launcher import cluster_dir
from tests.support import replog, replog_up
from tests.support_docs import REPOSITORY, ShellBlock, pages, runnable_blocks

pytestmark = pytest.mark.slow

BLOCK_TIMEOUT_S = 90.0
RUNNABLE = {page: runnable_blocks(page) for page in pages()}


@pytest.fixture(scope="module")
def cluster_cwd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory whose ./.replog is a running 3-broker cluster, as after `replog up`."""
    cwd = tmp_path_factory.mktemp("docs")
    directory = cwd / cluster_dir.DEFAULT_DIR
    started: list[cluster_dir.RecordedProcess] = []
    try:
        up = replog_up(directory)
        assert up.returncode == 0, up.stderr.decode()
        yield cwd
    finally:
        if cluster_dir.exists(directory):
            # Also every process a block started (`broker start` records its new PID).
            started = [p for p in cluster_dir.load(directory).processes() if p.pid]
        replog("down", "--dir", str(directory))
        for process in started:
            if process.pid is not None and process.running():
                os.kill(process.pid, signal.SIGKILL)


def _run(block: ShellBlock, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The block as a reader's shell runs it, stopping at the first failing command; the
    `replog` on PATH is the one beside this Python."""
    environment = dict(os.environ)
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}"
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.text],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )


def test_the_readme_marks_blocks_runnable() -> None:
    assert RUNNABLE[REPOSITORY / "README.md"], "README.md has no <!-- runnable --> block"


@pytest.mark.parametrize(
    "page",
    [page for page, blocks in RUNNABLE.items() if blocks],
    ids=lambda page: str(page.relative_to(REPOSITORY)),
)
def test_runnable_blocks_exit_0(page: Path, cluster_cwd: Path) -> None:
    for block in RUNNABLE[page]:
        result = _run(block, cluster_cwd)
        assert result.returncode == 0, (
            f"{page.name}:{block.line} exited {result.returncode}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
