"""Fixtures for the Spark tests: one SparkSession (local[2]) and one 3-broker cluster.

A SparkSession costs about ten seconds to start, so the whole test run shares one, as
it shares one cluster; tests keep apart by using topics of their own (`topic_name`).
Tests that kill brokers start their own cluster with the `brokers` fixture instead.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_replica.zk.embedded import EmbeddedZooKeeper
from tests.support import BrokerFactory

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("replog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_cluster(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    """Three brokers shared by the Spark tests that do not stop brokers."""
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/spark-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("spark-cluster"),
    )
    try:
        for broker_id in (1, 2, 3):
            factory.start(broker_id)
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture
def bootstrap_servers(spark_cluster: BrokerFactory) -> str:
    return ",".join(f"{host}:{port}" for host, port in spark_cluster.bootstrap)


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
