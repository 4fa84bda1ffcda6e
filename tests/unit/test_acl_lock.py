"""What `replog zookeeper lock-znodes` counts as open, and which znodes it keeps secret."""

from __future__ import annotations

from kazoo.security import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_acl, make_digest_acl

from spark_replica.zk.acl_lock import is_secret, world_may_change

LOCKED = [make_digest_acl("broker", "zk-secret", all=True), *READ_ACL_UNSAFE]


def test_only_rights_beyond_read_for_anyone_make_a_znode_open() -> None:
    assert world_may_change(OPEN_ACL_UNSAFE)
    assert world_may_change([*LOCKED, make_acl("world", "anyone", delete=True)])
    assert not world_may_change(LOCKED)
    assert not world_may_change(LOCKED[:1])  # private: the world has nothing
    # Another scheme with every right is somebody's, not everybody's.
    assert not world_may_change([make_acl("ip", "10.0.0.1", all=True)])


def test_credentials_stay_secret_and_their_neighbours_do_not() -> None:
    assert is_secret("/config/users")
    assert is_secret("/config/users/alice")
    assert is_secret("/replog/scram_fake_key")
    assert not is_secret("/config/users-of-another-kind")
    assert not is_secret("/config/topics/users")
    assert not is_secret("/config")
