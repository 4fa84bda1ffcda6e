"""The console's server on loopback, before it has read any cluster: the page and its
files, the JSON documents, and what it refuses (unknown paths, writes, huge heads)."""

from __future__ import annotations

import asyncio
import json

from spark_replica.client import Cluster
from spark_replica.tools.console.app import Console
from spark_replica.tools.console.cluster_source import ClusterSource
from spark_replica.tools.console.http import MAX_HEAD_BYTES, parse_response
from spark_replica.tools.console.server import ConsoleServer


async def exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


def answers(requests: list[bytes], allow_hosts: tuple[str, ...] = ()) -> list[bytes]:
    async def main() -> list[bytes]:
        cluster = Cluster([("127.0.0.1", 1)])
        console = Console(ClusterSource(cluster, zk=None), checkpoints=[])
        server = await ConsoleServer(console, allow_hosts).start("127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return [await exchange(port, r) for r in requests]

    return asyncio.run(asyncio.wait_for(main(), 30))


def get(path: str, method: str = "GET", host: str = "127.0.0.1:8080") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()


def test_the_page_its_files_and_the_documents_are_served() -> None:
    page, script, style, cluster, rates, lag = answers(
        [
            get(p)
            for p in ("/", "/console.js", "/console.css", "/api/cluster", "/api/rates", "/api/lag")
        ]
    )
    assert parse_response(page)[0] == 200
    assert b'id="brokers"' in parse_response(page)[1]
    assert b"Content-Type: text/javascript" in script
    assert b"Content-Type: text/css" in style
    assert json.loads(parse_response(cluster)[1])["error"] == "not read yet"
    assert json.loads(parse_response(rates)[1])["available"] is False
    assert json.loads(parse_response(lag)[1])["queries"] == []


def test_unknown_paths_writes_and_huge_heads_are_refused() -> None:
    unknown, api_unknown, post, traversal, huge, head = answers(
        [
            get("/nope"),
            get("/api/nope"),
            get("/api/cluster", "POST"),
            get("/../pyproject.toml"),
            b"GET / HTTP/1.1\r\nX: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n",
            get("/", "HEAD"),
        ]
    )
    assert parse_response(unknown)[0] == 404
    assert parse_response(api_unknown)[0] == 404
    assert parse_response(post)[0] == 405
    assert parse_response(traversal)[0] == 404
    assert parse_response(huge)[0] == 431
    head_status, head_body = head.split(b"\r\n", 1)[0], head.partition(b"\r\n\r\n")[2]
    assert head_status == b"HTTP/1.1 200 OK"
    assert head_body == b""


def test_only_requests_naming_this_console_are_served() -> None:
    """DNS rebinding: a page on another site that resolves its name to 127.0.0.1 still
    names that site in Host, and gets nothing."""
    hosts = [
        "localhost:8080",
        "LOCALHOST.",
        "127.0.0.1",
        "[::1]:8080",
        "10.1.2.3:80",
        "console.example:8080",
        "evil.example:8080",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "[::1",
    ]
    answered = answers([get("/api/cluster", host=h) for h in hosts], ("console.example",))
    statuses = dict(zip(hosts, (parse_response(a)[0] for a in answered), strict=True))
    assert statuses == {
        "localhost:8080": 200,
        "LOCALHOST.": 200,
        "127.0.0.1": 200,
        "[::1]:8080": 200,
        "10.1.2.3:80": 200,
        "console.example:8080": 200,
        "evil.example:8080": 421,
        "localhost.evil.example": 421,
        "127.0.0.1.nip.io": 421,
        "[::1": 400,
    }
    (no_host,) = answers([b"GET / HTTP/1.1\r\n\r\n"])
    assert parse_response(no_host)[0] == 400
