"""examples/streaming_etl.py submitted to a Spark standalone cluster, as a user runs it.

A master and two workers (1 core, 1 GiB each) from the pyspark wheel, a driver started
by `spark-submit --master spark://...` and executors in JVMs of their own, reading from
and writing to the shared 3-broker cluster. The executors' Python is the project's venv,
named by PYSPARK_PYTHON, as on hosts that share one installation; the README shows
the packed-venv form for hosts that do not. No SparkSession is created in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spark_replica.tools.launcher.zookeeper import stop_pid
from tests.spark.conftest import StoredRecord, TopicTools
from tests.support import BrokerFactory
from tests.support_spark import (
    StandaloneCluster,
    session_members,
    spark_environment,
    spark_home,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ETL = Path(__file__).resolve().parents[2] / "examples" / "streaming_etl.py"
RECORDS = 300
SUBMIT_TIMEOUT_S = 150.0
# Short-lived JVMs: the C1 compiler alone starts faster, and one GC thread suits 2 cores.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path / "spark", workers=2, worker_cores=1, worker_memory="1g")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def submit(cluster: StandaloneCluster, work: Path, app_args: list[str]) -> tuple[int, list[int]]:
    """Run spark-submit to the end: its exit code, and the processes it left behind.

    Whatever it left is then stopped, so a failing test leaves nothing either.
    """
    local_dir = work / "driver-local"
    local_dir.mkdir(parents=True)
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master", cluster.master_url,
        "--conf", f"spark.local.dir={local_dir}",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.memory=512m",
        "--conf", "spark.executor.memory=512m",
        "--conf", "spark.cores.max=2",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.ui.enabled=false",
        "--driver-java-options", QUICK_JVM,
        "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM}",
        str(ETL),
        *app_args,
    ]  # fmt: skip
    with open(work / "spark-submit.log", "wb") as log:
        driver = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**spark_environment(cluster.host, local_dir), "PYSPARK_PYTHON": sys.executable},
            start_new_session=True,
            cwd=work,  # where a driver leaves stray files (spark-warehouse, derby.log)
        )
    try:
        code = driver.wait(timeout=SUBMIT_TIMEOUT_S)
        return code, wait_gone([driver.pid])
    finally:
        stop_pid(driver.pid, 10.0, driver)
        for pid in session_members([driver.pid]):
            stop_pid(pid, 10.0)


def wait_gone(session_ids: list[int], timeout_s: float = 20.0) -> list[int]:
    """The processes still in these sessions once they empty or the time is up."""
    deadline = time.monotonic() + timeout_s
    while (left := session_members(session_ids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_streaming_etl_on_a_standalone_cluster_writes_every_record_once(
    standalone: StandaloneCluster,
    topics: TopicTools,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    stored_records: Callable[..., list[StoredRecord]],
    topic_name: str,
    tmp_path: Path,
) -> None:
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    topics.create(source, 3, replication_factor=3)
    topics.create(sink, 3, replication_factor=3)
    amounts = {f"user-{i}": float(i + 1) for i in range(RECORDS)}
    topics.produce(source, [json.dumps({"user": u, "amount": a}) for u, a in amounts.items()])

    code, driver_leftovers = submit(
        standalone,
        tmp_path,
        ["--bootstrap", bootstrap_servers, "--source", source, "--sink", sink,
         "--checkpoint", str(tmp_path / "checkpoint"), "--available-now",
         "--max-offsets-per-trigger", str(RECORDS // 3)],
    )  # fmt: skip
    assert code == 0, (tmp_path / "spark-submit.log").read_text()[-4000:]
    assert driver_leftovers == []

    written = sorted(
        (r.key, json.loads(r.value or b"null"))
        for r in stored_records(spark_cluster.bootstrap, sink)
    )
    assert written == sorted((u.encode(), {"user": u, "amount": a}) for u, a in amounts.items())
    # Each worker launched an executor, and the executors ran the query's tasks.
    executor_logs = [
        log for index in (1, 2) for log in standalone.worker_dir(index).glob("app-*/*/stderr")
    ]
    assert len(executor_logs) == 2
    assert any("Finished task" in log.read_text() for log in executor_logs)

    sessions = standalone.session_ids
    assert standalone.stop() == []
    assert wait_gone(sessions) == []
