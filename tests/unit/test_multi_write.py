"""MultiWrite (spark_replica/zk/multi_write.py) sends the bytes kazoo's own transaction
would: the same multi-op, packed without kazoo's per-operation work."""

from __future__ import annotations

from kazoo.protocol.serialization import CheckVersion, Create, SetData, Transaction
from kazoo.security import OPEN_ACL_UNSAFE

from spark_replica.zk.multi_write import MultiWrite


def test_the_multi_op_is_kazoos_byte_for_byte() -> None:
    ours = MultiWrite("/chroot")
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
    assert MultiWrite().serialize() == bytes(Transaction([]).serialize())
