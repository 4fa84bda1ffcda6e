"""`replog up --netns` where namespaces cannot be made (here: run as an unprivileged user)
refuses with the reason, and creates nothing: no cluster directory, no process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support import CLI_TIMEOUT_S

NOBODY = 65534


def as_unprivileged_user() -> list[str]:
    """What runs a command without root: nothing when we are not root already."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) is needed to run a command as nobody"
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def test_up_netns_without_root_says_why_and_creates_nothing() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        os.chmod(scratch, 0o777)
        completed = subprocess.run(
            [
                *as_unprivileged_user(),
                sys.executable,
                "-m",
                "spark_replica.tools.cli.main",
                "up",
                "--brokers",
                "1",
                "--netns",
                "--dir",
                str(Path(scratch) / "cluster"),
            ],
            capture_output=True,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )
        assert completed.returncode == 1, completed.stderr
        assert completed.stderr.decode().strip() == (
            "replog: network namespaces need root: run as root (or with sudo)"
        )
        assert not (Path(scratch) / "cluster").exists()
