"""kazoo's exceptions become replog's typed errors in one place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)

from spark_replica.errors import (
    ZnodeExistsError,
    ZnodeMissingError,
    ZnodeVersionError,
    ZooKeeperConnectionError,
    ZooKeeperError,
)
from spark_replica.zk.kazoo_errors import failures, translate, translated


@pytest.mark.parametrize(
    ("kazoo_error", "replog_error"),
    [
        (NoNodeError(), ZnodeMissingError),
        (NodeExistsError(), ZnodeExistsError),
        (BadVersionError(), ZnodeVersionError),
        (ConnectionLoss(), ZooKeeperConnectionError),
        (NotEmptyError(), ZooKeeperError),
    ],
)
def test_each_kazoo_error_has_its_replog_error(
    kazoo_error: Exception, replog_error: type[ZooKeeperError]
) -> None:
    assert type(translate(kazoo_error)) is replog_error


def test_a_lost_connection_is_retriable_and_a_conflict_is_not() -> None:
    assert ZooKeeperConnectionError.retriable and not ZnodeVersionError.retriable


def test_translated_keeps_the_kazoo_error_as_the_cause() -> None:
    with pytest.raises(ZnodeMissingError) as raised, translated():
        raise NoNodeError()
    assert isinstance(raised.value.__cause__, NoNodeError)


def test_multi_op_failures_skip_successes_and_rollbacks() -> None:
    [ok, rolled_back, failed] = failures([True, RolledBackError(), BadVersionError()])
    assert ok is None and rolled_back is None and isinstance(failed, ZnodeVersionError)


KAZOO_ERRORS_IMPORT = re.compile(
    r"^\s*(from kazoo\.(exceptions|handlers)|import kazoo\.exceptions)", re.M
)


def test_only_the_adapter_imports_kazoos_exceptions() -> None:
    root = Path(__file__).resolve().parents[2]
    importing = sorted(
        str(path.relative_to(root))
        for package in ("brokerd", "spark_replica", "connectors")
        for path in (root / package).rglob("*.py")
        if KAZOO_ERRORS_IMPORT.search(path.read_text(encoding="utf-8"))
    )
    assert importing == ["spark_replica/zk/kazoo_errors.py"]
