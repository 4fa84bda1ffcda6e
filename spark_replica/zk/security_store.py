"""SCRAM credentials and ACLs in ZooKeeper, in Kafka's layout.

- `/config/users/NAME`: `{"version":1,"config":{"SCRAM-SHA-256":"salt=...,..."}}`, one
  key per mechanism (other keys, e.g. quotas written by Kafka's tools, are kept). A write
  also creates `/config/changes/config_change_N` naming `users/NAME`, as Kafka does.
- `/kafka-acl/<Type>/<name>` (LITERAL) and `/kafka-acl-extended/prefixed/<Type>/<name>`
  (PREFIXED): the JSON of spark_replica.security.acl.encode_entries. A write also creates
  a sequential notification under `/kafka-acl-changes` or `/kafka-acl-extended-changes`.
  ACL data that cannot be read (a znode that is not ACL JSON, an entry with an unknown
  operation) is skipped and reported by `load_acls`, never stopping the other ACLs from
  loading; a write keeps such entries as they are.

Every write is a read-modify-write checked by the znode's version and done in one
transaction with its notification: a concurrent writer makes ours fail and retry on the
new data, so no entry is ever lost, and a change is never without its notification.

Credential znodes (and `/config/users`) get `private_acl(zk)`: the session's default ACL
without its world-readable entries, so a salted credential cannot be read by a session
that is not authenticated. Everything else gets the session's default ACL.

Readers do not parse notifications: `AclChangeWatcher` only says "something changed" and
the caller reloads every ACL (a few hundred znodes at most). So old notifications can go:
each new one deletes all but the newest `KEEP_NOTIFICATIONS`.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from kazoo.client import KazooClient
from kazoo.security import ACL

from spark_replica.errors import (
    ConfigError,
    ZnodeExistsError,
    ZnodeMissingError,
    ZnodeVersionError,
    ZooKeeperError,
)
from spark_replica.security.acl import (
    AclBinding,
    AclEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    StoredEntries,
    decode_entries,
    encode_entries,
)
from spark_replica.security.scram import MECHANISMS, ScramCredential, new_fake_key
from spark_replica.zk import znodes
from spark_replica.zk.kazoo_errors import (
    children_if_present,
    failures,
    read_if_present,
    translated,
)

logger = logging.getLogger("spark_replica.zk.security_store")

CONFIG_PATH = "/config"
USERS_PATH = "/config/users"
USER_ENTITY_PREFIX = "users/"
USER_CONFIG_VERSION = 1
# The cluster's key for the fake credentials of unknown users (scram.fake_credential).
FAKE_KEY_PATH = "/replog/scram_fake_key"
ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended/prefixed"
ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
EXTENDED_CHANGE_VERSION = 1
# Read-modify-write attempts before giving up on a znode that keeps changing.
WRITE_ATTEMPTS = 50
# Longest pause between attempts, so racing writers spread out instead of colliding again.
MAX_BACKOFF_S = 0.05
KEEP_NOTIFICATIONS = 100

_WORLD = ("world", "anyone")
_RETRY_ERRORS = (ZnodeVersionError, ZnodeExistsError, ZnodeMissingError)


def private_acl(zk: KazooClient) -> list[ACL] | None:
    """The session's default ACL without world entries; None if that leaves nothing (a
    session with no authenticated identity cannot make a znode private)."""
    private = [a for a in zk.default_acl or () if (a.id.scheme, a.id.id) != _WORLD]
    return private or None


# ZooKeeper's path rule (PathUtils.validatePath): no control characters, and nothing in
# the surrogate and private-use ranges (which also covers names that were not UTF-8 and
# arrived decoded with surrogateescape). Checked here because kazoo encodes a path in its
# connection thread, where a failure ends the whole session instead of one call.
_NOT_IN_ZNODE_NAMES = (
    ("\u0000", "\u001f"),
    ("\u007f", "\u009f"),
    ("\ud800", "\uf8ff"),
    ("\ufff0", "\uffff"),
)


def _check_node_name(name: str, what: str) -> None:
    if not name or "/" in name or name in (".", ".."):
        raise ConfigError(f"{what} {name!r} cannot be a ZooKeeper node name")
    refused = [c for c in name if any(low <= c <= high for low, high in _NOT_IN_ZNODE_NAMES)]
    if refused:
        raise ConfigError(f"{what} {name!r} has characters ZooKeeper cannot hold: {refused[0]!r}")


def user_path(username: str) -> str:
    _check_node_name(username, "user name")
    return f"{USERS_PATH}/{username}"


def acl_path(pattern: ResourcePattern) -> str:
    _check_node_name(pattern.name, f"{pattern.resource_type} name")
    root = ACL_PATH if pattern.pattern_type is PatternType.LITERAL else EXTENDED_ACL_PATH
    return f"{root}/{pattern.resource_type.value}/{pattern.name}"


# --- one read-modify-write ------------------------------------------------------------


class _Retry(Exception):
    """The znode changed between our read and our write: read again."""


def _commit(zk: KazooClient, build: Callable[[Any], None]) -> None:
    """Run one transaction; _Retry if it lost a race, ZooKeeperError for anything else."""
    with translated():
        transaction = zk.transaction()
        build(transaction)
        errors = [e for e in failures(transaction.commit()) if e is not None]
    if any(isinstance(e, _RETRY_ERRORS) for e in errors):
        raise _Retry
    if errors:
        raise errors[0]


def _with_retries(what: str, attempt: Callable[[], Any]) -> Any:
    for attempt_number in range(WRITE_ATTEMPTS):
        try:
            return attempt()
        except _Retry:
            time.sleep(random.uniform(0, MAX_BACKOFF_S * min(1.0, attempt_number / 10)))
    raise ZooKeeperError(f"{what}: the znode kept changing; gave up after {WRITE_ATTEMPTS} tries")


def _write_node(
    transaction: Any, path: str, data: bytes | None, found: Any, acl: list[ACL] | None
) -> None:
    """Add to a transaction: create, replace (at the version read) or delete (data None)."""
    if found is None:
        assert data is not None
        transaction.create(path, data, acl=acl)
    elif data is None:
        transaction.delete(path, version=found[1].version)
    else:
        transaction.set_data(path, data, version=found[1].version)


# --- SCRAM credentials ----------------------------------------------------------------


def _decode_user_config(path: str, data: bytes) -> dict[str, str]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZooKeeperError(f"{path} does not hold JSON: {exc}") from None
    config = value.get("config") if isinstance(value, dict) else None
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise ZooKeeperError(f"{path} lacks a valid 'config' object")
    return config


def _encode_user_config(config: dict[str, str]) -> bytes:
    return json.dumps({"version": USER_CONFIG_VERSION, "config": config}, sort_keys=True).encode()


def _ensure_user_paths(zk: KazooClient) -> None:
    with translated():
        zk.ensure_path(CONFIG_PATH)
        zk.ensure_path(USERS_PATH, acl=private_acl(zk))
        zk.ensure_path(znodes.CONFIG_CHANGES_PATH)


def _change_user(
    zk: KazooClient, username: str, change: Callable[[dict[str, str]], dict[str, str] | None]
) -> bool:
    """Apply `change` to the user's config (None: leave it as it is); False if unchanged.

    An empty config deletes the znode.
    """
    path = user_path(username)
    _ensure_user_paths(zk)
    notification = znodes.ConfigChangeNotification(f"{USER_ENTITY_PREFIX}{username}").encode()

    def attempt() -> bool:
        found = read_if_present(zk, path)
        current = {} if found is None else _decode_user_config(path, found[0])
        changed = change(dict(current))
        if changed is None or (found is None and not changed):
            return False
        data = _encode_user_config(changed) if changed else None

        def build(transaction: Any) -> None:
            _write_node(transaction, path, data, found, private_acl(zk))
            transaction.create(znodes.CONFIG_CHANGE_PREFIX, notification, sequence=True)

        _commit(zk, build)
        return True

    changed: bool = _with_retries(f"changing user {username!r}", attempt)
    return changed


def write_credential(zk: KazooClient, username: str, credential: ScramCredential) -> None:
    """Store (or replace) the user's credential for its mechanism, keeping the others."""
    encoded = credential.encode()

    def put(config: dict[str, str]) -> dict[str, str] | None:
        if config.get(credential.mechanism) == encoded:
            return None
        config[credential.mechanism] = encoded
        return config

    _change_user(zk, username, put)


def delete_credential(zk: KazooClient, username: str, mechanism: str | None = None) -> bool:
    """Remove one mechanism's credential (None: every SCRAM one); False if there was none."""
    if mechanism is not None and mechanism not in MECHANISMS:
        raise ConfigError(f"unknown SCRAM mechanism {mechanism!r} (valid: {', '.join(MECHANISMS)})")
    doomed = set(MECHANISMS) if mechanism is None else {mechanism}

    def remove(config: dict[str, str]) -> dict[str, str] | None:
        if not doomed & config.keys():
            return None
        return {key: value for key, value in config.items() if key not in doomed}

    return _change_user(zk, username, remove)


def read_credential(zk: KazooClient, username: str, mechanism: str) -> ScramCredential | None:
    path = user_path(username)
    found = read_if_present(zk, path)
    if found is None:
        return None
    text = _decode_user_config(path, found[0]).get(mechanism)
    if text is None:
        return None
    try:
        return ScramCredential.decode(mechanism, text)
    except ConfigError as exc:
        raise ZooKeeperError(f"{path} holds a bad {mechanism} credential: {exc}") from exc


def read_user_credentials(zk: KazooClient, username: str) -> dict[str, ScramCredential]:
    """Every SCRAM credential of a user by mechanism, in one read (none if unknown): a
    login reads exactly this, whoever the user and whatever the mechanism, so that
    ZooKeeper's answer time does not tell which users exist."""
    path = user_path(username)
    found = read_if_present(zk, path)
    if found is None:
        return {}
    config = _decode_user_config(path, found[0])
    credentials = {}
    for mechanism in MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            credentials[mechanism] = ScramCredential.decode(mechanism, text)
        except ConfigError as exc:
            raise ZooKeeperError(f"{path} holds a bad {mechanism} credential: {exc}") from exc
    return credentials


def fake_credential_key(zk: KazooClient) -> bytes:
    """The cluster's key for fake credentials, created by the first broker that asks.

    Kept as private as the credentials (`private_acl`): whoever knew it could tell the
    fake salts from real ones.
    """
    found = read_if_present(zk, FAKE_KEY_PATH)
    if found is None:
        try:
            with translated():
                zk.create(FAKE_KEY_PATH, new_fake_key(), acl=private_acl(zk), makepath=True)
        except ZnodeExistsError:
            pass  # another broker made it first: use theirs
        found = read_if_present(zk, FAKE_KEY_PATH)
        if found is None:
            raise ZooKeeperError(f"{FAKE_KEY_PATH} vanished as it was created")
    return found[0]


def list_users(zk: KazooClient) -> dict[str, list[str]]:
    """Every user with a SCRAM credential, and its mechanisms (sorted)."""
    users: dict[str, list[str]] = {}
    for username in sorted(children_if_present(zk, USERS_PATH)):
        path = f"{USERS_PATH}/{username}"
        found = read_if_present(zk, path)
        if found is None:
            continue
        mechanisms = sorted(m for m in _decode_user_config(path, found[0]) if m in MECHANISMS)
        if mechanisms:
            users[username] = mechanisms
    return users


# --- ACLs -----------------------------------------------------------------------------


def _change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The change path and data Kafka writes for a change of this pattern's ACLs."""
    if pattern.pattern_type is PatternType.LITERAL:
        return ACL_CHANGES_PATH, f"{pattern.resource_type.value}:{pattern.name}".encode()
    data = {
        "version": EXTENDED_CHANGE_VERSION,
        "resourceType": pattern.resource_type.value,
        "name": pattern.name,
        "patternType": pattern.pattern_type.value,
    }
    return EXTENDED_ACL_CHANGES_PATH, json.dumps(data).encode()


def _read_entries(zk: KazooClient, path: str) -> tuple[StoredEntries, Any]:
    """The pattern's stored ACLs and the znode as read; ZooKeeperError if its data is not
    Kafka's ACL JSON at all (a write must not replace what it cannot read)."""
    found = read_if_present(zk, path)
    if found is None:
        return StoredEntries(set()), None
    try:
        return decode_entries(found[0]), found
    except ConfigError as exc:
        raise ZooKeeperError(f"{path} holds bad ACL data: {exc}") from exc


def _change_acls(
    zk: KazooClient,
    pattern: ResourcePattern,
    change: Callable[[set[AclEntry]], set[AclEntry]],
    keep_unreadable: bool = True,
) -> int:
    """Replace the pattern's ACLs by `change(current)`; returns how many entries changed.

    Entries that could not be read are written back as they were (another tool's, or a
    newer Kafka's), unless `keep_unreadable` is False.
    """
    path = acl_path(pattern)
    changes_path, notification = _change_notification(pattern)
    with translated():
        zk.ensure_path(path.rpartition("/")[0])
        zk.ensure_path(changes_path)

    def attempt() -> int:
        stored, found = _read_entries(zk, path)
        current = stored.entries
        kept = stored.unreadable if keep_unreadable else []
        wanted = change(set(current))
        if wanted == current and len(kept) == len(stored.unreadable):
            return 0
        data = encode_entries(wanted, kept) if wanted or kept else None

        def build(transaction: Any) -> None:
            _write_node(transaction, path, data, found, None)
            transaction.create(f"{changes_path}/{ACL_CHANGE_PREFIX}", notification, sequence=True)

        _commit(zk, build)
        return len(current ^ wanted) + len(stored.unreadable) - len(kept)

    count: int = _with_retries(f"changing the ACLs of {path}", attempt)
    if count:
        _purge_notifications(zk, changes_path)
    return count


def add_acls(zk: KazooClient, pattern: ResourcePattern, entries: Iterable[AclEntry]) -> None:
    added = set(entries)
    _change_acls(zk, pattern, lambda current: current | added)


def remove_acls(
    zk: KazooClient, pattern: ResourcePattern, entries: Iterable[AclEntry] | None
) -> int:
    """Remove the given entries (None: all, unreadable ones too) from the pattern; returns
    how many were there."""
    if entries is None:
        return _change_acls(zk, pattern, lambda current: set(), keep_unreadable=False)
    doomed = set(entries)
    return _change_acls(zk, pattern, lambda current: current - doomed)


@dataclass(frozen=True)
class SkippedAcl:
    """ACL data in ZooKeeper that could not be read: the znode, and why."""

    path: str
    reason: str


@dataclass
class AclLoad:
    """Every ACL that could be read (sorted), and what was skipped."""

    bindings: list[AclBinding]
    skipped: list[SkippedAcl]


def load_acls(zk: KazooClient) -> AclLoad:
    """Every ACL, each znode and each entry on its own: one that cannot be read (data that
    is not ACL JSON, an unknown operation, a resource type or name Kafka would not write) is
    skipped and reported, never stopping the others. Only failing to reach ZooKeeper raises.
    """
    bindings: list[AclBinding] = []
    skipped: list[SkippedAcl] = []
    known = {t.value: t for t in ResourceType}
    for root, pattern_type in (
        (ACL_PATH, PatternType.LITERAL),
        (EXTENDED_ACL_PATH, PatternType.PREFIXED),
    ):
        for type_name in children_if_present(zk, root):
            type_path = f"{root}/{type_name}"
            resource_type = known.get(type_name)
            if resource_type is None:
                skipped.append(SkippedAcl(type_path, f"unknown resource type {type_name!r}"))
                continue
            for name in children_if_present(zk, type_path):
                path = f"{type_path}/{name}"
                found = read_if_present(zk, path)
                if found is None:
                    continue
                try:
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    stored = decode_entries(found[0])
                except ConfigError as exc:
                    skipped.append(SkippedAcl(path, str(exc)))
                    continue
                bindings.extend(AclBinding(pattern, entry) for entry in stored.entries)
                skipped.extend(SkippedAcl(path, kept.reason) for kept in stored.unreadable)
    return AclLoad(sorted(bindings), skipped)


def read_all_acls(zk: KazooClient) -> list[AclBinding]:
    """Every ACL that can be read, sorted (load_acls without the report)."""
    return load_acls(zk).bindings


def notification_sequence(child: str) -> int | None:
    """`acl_changes_0000000042` -> 42; None for a znode that is not a notification."""
    number = child.removeprefix(ACL_CHANGE_PREFIX)
    return int(number) if child.startswith(ACL_CHANGE_PREFIX) and number.isdigit() else None


def _purge_notifications(zk: KazooClient, changes_path: str) -> None:
    """Delete all but the newest KEEP_NOTIFICATIONS; losing a race to another purger is fine."""
    numbered = sorted(
        (sequence, child)
        for child in children_if_present(zk, changes_path)
        if (sequence := notification_sequence(child)) is not None
    )
    for _, child in numbered[:-KEEP_NOTIFICATIONS]:
        try:
            with translated():
                zk.delete(f"{changes_path}/{child}")
        except ZnodeMissingError:
            continue


class AclChangeWatcher:
    """Calls `on_change()` once when started and again after every ACL change notification.

    The first call is made by start() itself, after both watches are set, so a change made
    while starting is never missed; later calls come from kazoo's thread. on_change must
    be quick and thread-safe (hand the reload to another thread or loop). start() blocks
    on ZooKeeper. Deleted (purged) notifications are not changes: only a sequence number
    higher than any seen before calls it. After a lost session kazoo lists the children
    again, so a change made meanwhile is still reported.
    """

    def __init__(self, zk: KazooClient, on_change: Callable[[], None]) -> None:
        self._zk = zk
        self._on_change = on_change
        self._lock = threading.Lock()
        self._newest: dict[str, int] = {}
        self._started = False
        self._stopped = False

    def start(self) -> None:
        with translated():
            for path in (ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH):
                self._zk.ensure_path(path)
            for path in (ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH):
                self._zk.ChildrenWatch(path, partial(self._seen, path))
        with self._lock:
            self._started = True
        self._notify()

    def stop(self) -> None:
        """No more calls after this returns; kazoo drops each watch at its next event."""
        with self._lock:
            self._stopped = True

    def _seen(self, path: str, children: list[str]) -> bool:
        newest = max((s for s in map(notification_sequence, children) if s is not None), default=-1)
        with self._lock:
            if self._stopped:
                return False
            is_new = newest > self._newest.get(path, -1)
            self._newest[path] = max(newest, self._newest.get(path, -1))
            started = self._started
        if is_new and started:
            self._notify()
        return True

    def _notify(self) -> None:
        with self._lock:
            if self._stopped:
                return
        try:
            self._on_change()
        except Exception:
            logger.exception("the ACL change callback failed; the next change calls it again")
