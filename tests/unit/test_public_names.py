"""`spark_replica` exports its public names: each name in `__all__` imports and is the
object its own module defines, and loading the package alone loads none of them."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import spark_replica


def test_all_names_each_export_once() -> None:
    assert len(set(spark_replica.__all__)) == len(spark_replica.__all__)


@pytest.mark.parametrize("name", spark_replica.__all__)
def test_each_public_name_imports_as_its_own_module_defines_it(name: str) -> None:
    exported = getattr(spark_replica, name)
    home = spark_replica._HOMES[name]
    assert exported is getattr(importlib.import_module(home), name)
    namespace: dict[str, object] = {}
    exec(f"from spark_replica import {name}", namespace)
    assert namespace[name] is exported


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from spark_replica import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(spark_replica.__all__)


def test_every_exported_name_has_a_home_and_an_unknown_one_is_refused() -> None:
    assert set(spark_replica._HOMES) == set(spark_replica.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = spark_replica.Nothing


def test_importing_the_package_does_not_load_the_client() -> None:
    probe = (
        "import sys, spark_replica.errors; "
        "print(sorted(m for m in sys.modules if m.startswith('spark_replica.client')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"
