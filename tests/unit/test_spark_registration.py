"""Installing the package registers format("replog") with no user code.

Spark's lookup (pyspark/sql/worker/lookup_data_sources.py) lists installed top-level
modules with pkgutil.iter_modules() and takes `DefaultSource` from those named
`pyspark_*`. This runs that same lookup in a fresh interpreter outside the project
folder, so it only passes if the installed package (not the working directory) provides
the module; a setuptools "lenient" editable install, whose import hook iter_modules
cannot see, fails it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LOOKUP = """
from pkgutil import iter_modules
from importlib import import_module
from pyspark.sql.datasource import DataSource
found = {}
for info in iter_modules():
    if info.name.startswith("pyspark_"):
        module = import_module(info.name)
        source = getattr(module, "DefaultSource", None)
        if isinstance(source, type) and issubclass(source, DataSource):
            found[source.name()] = module.__name__
print(found.get("replog"))
"""


def test_sparks_lookup_finds_the_replog_source_from_any_folder(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", LOOKUP],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "pyspark_replog", (
        "format('replog') would not be found: install with "
        "`pip install -e . --config-settings editable_mode=strict` or `pip install .`"
    )
