"""The CLI starts without pyspark: every `replog` command would otherwise pay its import
(about 60 ms here) though only the Spark connector needs it."""

import subprocess
import sys


def test_the_cli_does_not_import_pyspark() -> None:
    probe = (
        "import sys, spark_replica.tools.cli.main; "
        "print(sorted(m for m in sys.modules if m.startswith('pyspark')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"
