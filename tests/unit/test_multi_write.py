"""MultiWrite (spark_replica/zk/multi_write.py) sends the bytes kazoo's own transaction
would: the same multi-op, packed without kazoo's per-operation work."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.protocol.serialization import CheckVersion, Create, SetData, Transaction
from kazoo.security import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_acl, make_digest_acl

from spark_replica.zk.multi_write import MultiWrite


def test_the_multi_op_is_kazoos_byte_for_byte() -> None:
    ours = MultiWrite("/chroot", OPEN_ACL_UNSAFE)
    ours.check("/controller_epoch", 7)
    ours.create("/brokers/topics/t/partitions/0", b"")
    ours.create("/brokers/topics/t/partitions/0/state", b'{"leader":1}')
    ours.set_data("/brokers/topics/t/partitions/1/state", b'{"leader":2}', 3)
    ours.set_data("/brokers/topics/t/partitions/2/state", b"", 0)
    kazoos = Transaction(
        [
            CheckVersion("/chroot/controller_epoch", 7),
            Create("/chroot/brokers/topics/t/partitions/0", b"", OPEN_ACL_UNSAFE, 0),
            Create(
                "/chroot/brokers/topics/t/partitions/0/state", b'{"leader":1}', OPEN_ACL_UNSAFE, 0
            ),
            SetData("/chroot/brokers/topics/t/partitions/1/state", b'{"leader":2}', 3),
            SetData("/chroot/brokers/topics/t/partitions/2/state", b"", 0),
        ]
    )
    assert ours.serialize() == bytes(kazoos.serialize())
    assert ours.operations == 5 and MultiWrite.type == Transaction.type


def test_an_empty_multi_op_is_only_its_end() -> None:
    assert MultiWrite("", OPEN_ACL_UNSAFE).serialize() == bytes(Transaction([]).serialize())


def test_creates_carry_the_sessions_acl_as_kazoo_encodes_it() -> None:
    """zookeeper.set.acl: a digest identity with every right, a SASL one, world read-only
    and an empty id (which jute writes as a null string) all come out as kazoo's bytes."""
    locked = [
        make_digest_acl("broker", "zk-secret", all=True),
        make_acl("sasl", "kafka", read=True, write=True, create=True, delete=True, admin=True),
        make_acl("auth", "", read=True),
        *READ_ACL_UNSAFE,
    ]
    ours = MultiWrite("/chroot", locked)
    ours.check("/controller_epoch", 3)
    ours.create("/brokers/topics/t/partitions/0", b"")
    ours.create("/brokers/topics/t/partitions/0/state", b'{"leader":1}')
    kazoos = Transaction(
        [
            CheckVersion("/chroot/controller_epoch", 3),
            Create("/chroot/brokers/topics/t/partitions/0", b"", locked, 0),
            Create("/chroot/brokers/topics/t/partitions/0/state", b'{"leader":1}', locked, 0),
        ]
    )
    assert ours.serialize() == bytes(kazoos.serialize())


def test_a_session_gives_its_multi_ops_its_chroot_and_default_acl() -> None:
    locked = [make_digest_acl("broker", "zk-secret", all=True), *READ_ACL_UNSAFE]
    secured = KazooClient(hosts="127.0.0.1:1/cluster", default_acl=locked)
    anonymous = KazooClient(hosts="127.0.0.1:1")
    for session, chroot, acl in ((secured, "/cluster", locked), (anonymous, "", OPEN_ACL_UNSAFE)):
        ours = MultiWrite.for_session(session)
        ours.create("/p", b"x")
        assert ours.serialize() == bytes(
            Transaction([Create(chroot + "/p", b"x", acl, 0)]).serialize()
        )
