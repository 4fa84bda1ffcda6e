"""Telling a process that could not listen from one that failed otherwise
(spark_replica/tools/launcher/brokers.py), from the output it wrote since it was started."""

from __future__ import annotations

from pathlib import Path

from spark_replica.tools.launcher.brokers import output_since, says_port_in_use


def test_python_and_java_bind_failures_are_recognised() -> None:
    assert says_port_in_use(
        "OSError: [Errno 98] error while attempting to bind on address "
        "('127.0.0.1', 40000): address already in use"
    )
    assert says_port_in_use("java.net.BindException: Address already in use")
    assert not says_port_in_use("ConfigError: log.dirs is not writable")


def test_only_this_start_s_output_is_read(tmp_path: Path) -> None:
    output = tmp_path / "broker.stderr"
    output.write_text("an earlier run: address already in use\n")
    offset = output.stat().st_size
    with output.open("a") as more:
        more.write("this run: another failure\n")
    assert output_since(output, offset) == "this run: another failure\n"
    output.write_text("started afresh\n")
    assert output_since(output, offset) == "started afresh\n", "a shorter file is read whole"
    assert output_since(tmp_path / "missing", 0) == ""
