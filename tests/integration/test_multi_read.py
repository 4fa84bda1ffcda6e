"""Reading many znodes with ZooKeeper's multiRead (spark_replica/counted_zk/multi_read.py): the
same answers as kazoo's own reads, in few requests (real ZooKeeper, no brokers)."""

from __future__ import annotations

import struct

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from brokerd.controller import zk_requests
from spark_replica.errors import MultiReadError, ZnodeNoAuthError
from spark_replica.zk import multi_read
from spark_replica.zk.multi_read import MultiReadRequest, get_many

COUNT = 2_500  # three multiReads (multi_read.READS_PER_REQUEST)


def test_many_reads_answer_as_single_reads_do(counted_zk: KazooClient) -> None:
    assert COUNT > 2 * multi_read.READS_PER_REQUEST
    counted_zk.ensure_path("/many")
    paths = [f"/many/{i}" for i in range(COUNT)]
    for start in range(0, COUNT, 500):
        transaction = counted_zk.transaction()
        for path in paths[start : start + 500]:
            transaction.create(path, path.encode() * (1 + len(path) % 3))
        transaction.commit()
    counted_zk.set("/many/7", b"")  # empty data reads back as b"", as kazoo's get says
    counted_zk.set("/many/8", b"x")  # and a zkVersion other than 0
    wanted = ["/many/missing", *paths, "/nowhere/at/all"]

    with zk_requests.counting() as tally:
        found = get_many(counted_zk, wanted)

    assert found == [None, *(counted_zk.get(path) for path in paths), None]
    assert found[8] is not None and found[8][0] == b""
    assert found[9] == (b"x", counted_zk.exists("/many/8"))
    assert (tally.requests, tally.round_trips) == (3, 1)
    assert get_many(counted_zk, []) == []


def test_a_read_refused_by_an_acl_raises_a_typed_error(counted_zk: KazooClient) -> None:
    counted_zk.create("/open", b"o")
    counted_zk.create("/private", b"p", acl=[make_digest_acl("someone", "secret", all=True)])
    with pytest.raises(ZnodeNoAuthError):
        get_many(counted_zk, ["/open", "/private"])


HEADER = struct.Struct("!i?i")


def test_an_answer_that_does_not_match_the_request_is_refused() -> None:
    request = MultiReadRequest(["/a", "/b"])
    one_error = HEADER.pack(-1, False, -101) + struct.pack("!i", -101)  # NONODE
    done = HEADER.pack(-1, True, -1)
    assert request.deserialize(one_error * 2 + done, 0) == [None, None]
    with pytest.raises(MultiReadError, match="1 answers to 2 reads"):
        request.deserialize(one_error + done, 0)
    with pytest.raises(MultiReadError, match="unexpected operation type 1"):
        request.deserialize(HEADER.pack(1, False, 0) + done, 0)


def test_the_request_is_zookeepers_multi_operation_record() -> None:
    body = MultiReadRequest(["/x"]).serialize()
    assert MultiReadRequest.type == 22
    assert body == HEADER.pack(4, False, -1) + struct.pack("!i", 2) + b"/x\x00" + HEADER.pack(
        -1, True, -1
    )
