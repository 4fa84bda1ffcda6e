"""`replog acls add|remove|list`, with kafka-acls' flags and defaults.

An ACL is principal x host x operation x resource: `add` makes every combination of the
given principals (each with its allow or deny hosts, default "*"), operations (default
All) and resources (--topic, --group, --cluster; pattern type literal unless
--resource-pattern-type prefixed). `remove` with principals removes those combinations;
without, every ACL of the named resources. `list` shows all ACLs, or those of the named
resources and principals; with `--resource-pattern-type match` it also shows the wildcard
and prefixed ACLs that apply to a named resource.

`list` prints a table with one row per ACL, or with `--json` one object per ACL:
`{"resource_type": "Topic", "pattern_type": "Literal", "resource": "orders",
"principal": "User:alice", "permission": "Allow", "operation": "Read", "host": "*"}`.
`add` and `remove` print what they changed as kafka-acls does.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from itertools import groupby, product

from spark_replica.client import Cluster
from spark_replica.client.security_admin import SecurityAdmin
from spark_replica.errors import ConfigError
from spark_replica.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    parse_operation,
    parse_pattern_type,
    parse_principal,
)
from spark_replica.tools.cli.common import add_connection_options, run_with_cluster
from spark_replica.tools.cli.output import add_json_flag, print_json, print_table, rows_as_json
from spark_replica.wire.native.acls import AclFilter, acl_filter

# The operations kafka-acls accepts for each resource type.
VALID_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset(
        {
            Operation.READ,
            Operation.WRITE,
            Operation.CREATE,
            Operation.DESCRIBE,
            Operation.DELETE,
            Operation.ALTER,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
            Operation.ALL,
        }
    ),
    ResourceType.GROUP: frozenset(
        {Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.ALL}
    ),
    ResourceType.CLUSTER: frozenset(
        {
            Operation.CREATE,
            Operation.CLUSTER_ACTION,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
            Operation.ALTER,
            Operation.DESCRIBE,
            Operation.IDEMPOTENT_WRITE,
            Operation.ALL,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE, Operation.ALL}),
    ResourceType.DELEGATION_TOKEN: frozenset({Operation.DESCRIBE, Operation.ALL}),
    ResourceType.USER: frozenset(
        {Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS, Operation.ALL}
    ),
}
# The flags naming a resource of each named type (kafka-acls' names), besides --cluster.
RESOURCE_FLAGS: dict[ResourceType, str] = {
    ResourceType.TOPIC: "topic",
    ResourceType.GROUP: "group",
    ResourceType.TRANSACTIONAL_ID: "transactional_id",
    ResourceType.DELEGATION_TOKEN: "delegation_token",
    ResourceType.USER: "user_principal",
}
_RESOURCE_CHOICES = (
    ", ".join(f"--{flag.replace('_', '-')}" for flag in RESOURCE_FLAGS.values()) + " or --cluster"
)
# Operations are listed in Kafka's order (All, Read, Write, ...), not alphabetically.
_ORDER = list(Operation)
# Pattern types a filter (list, remove) may use besides literal and prefixed.
ANY_PATTERN, MATCH_PATTERN = "any", "match"
LIST_COLUMNS = (
    "resource_type",
    "pattern_type",
    "resource",
    "principal",
    "permission",
    "operation",
    "host",
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    acls = subparsers.add_parser("acls", help="add, remove and list ACLs")
    actions = acls.add_subparsers(dest="action", required=True)
    for name, text in (
        ("add", "add ACLs"),
        ("remove", "remove ACLs"),
        ("list", "list ACLs"),
    ):
        action = actions.add_parser(name, help=text)
        _add_resource_options(action, filtering=name != "add")
        if name == "list":
            action.add_argument(
                "--principal",
                action="append",
                default=[],
                help="only ACLs of this principal (repeatable)",
            )
            add_json_flag(action)
        else:
            _add_entry_options(action)
        add_connection_options(action)
    acls.set_defaults(handler=run)


def _add_resource_options(parser: argparse.ArgumentParser, *, filtering: bool) -> None:
    parser.add_argument(
        "--topic", action="append", default=[], help="a topic (* for all; repeatable)"
    )
    parser.add_argument(
        "--group", action="append", default=[], help="a group (* for all; repeatable)"
    )
    parser.add_argument(
        "--transactional-id",
        action="append",
        default=[],
        help="a transactional id (* for all; repeatable)",
    )
    parser.add_argument(
        "--delegation-token",
        action="append",
        default=[],
        help="a delegation token id (* for all; repeatable)",
    )
    parser.add_argument(
        "--user-principal",
        action="append",
        default=[],
        metavar="User:NAME",
        help="a user, as the resource of CreateTokens/DescribeTokens (repeatable)",
    )
    parser.add_argument("--cluster", action="store_true", help="the cluster")
    choices = "literal|prefixed" + ("|any|match" if filtering else "")
    parser.add_argument(
        "--resource-pattern-type",
        default="literal",
        metavar=choices.upper(),
        help=f"{choices} (default literal)",
    )


def _add_entry_options(parser: argparse.ArgumentParser) -> None:
    for permission in ("allow", "deny"):
        parser.add_argument(
            f"--{permission}-principal",
            action="append",
            default=[],
            metavar="User:NAME",
            help=f"principal to {permission} (repeatable; User:* for everyone)",
        )
        parser.add_argument(
            f"--{permission}-host",
            action="append",
            default=[],
            metavar="HOST",
            help=f"host the {permission} principals connect from (repeatable; default *)",
        )
    parser.add_argument(
        "--operation",
        action="append",
        default=[],
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens or All "
        "(repeatable; default All)",
    )


# --------------------------------------------------------------------------- from flags


def resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    named = [
        (resource_type, name)
        for resource_type, flag in RESOURCE_FLAGS.items()
        for name in getattr(args, flag)
    ]
    if args.cluster:
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))
    for resource_type, name in named:
        if not name:
            flag = RESOURCE_FLAGS[resource_type].replace("_", "-")
            raise ConfigError(f"--{flag} needs a name")
    return named


def entries(args: argparse.Namespace) -> list[AclEntry]:
    """principals x hosts x operations, for allow and deny."""
    operations = [parse_operation(text) for text in args.operation] or [Operation.ALL]
    made = []
    for permission, principals, hosts in (
        (Permission.ALLOW, args.allow_principal, args.allow_host),
        (Permission.DENY, args.deny_principal, args.deny_host),
    ):
        principals = [parse_principal(p) for p in principals]
        if hosts and not principals:
            flag = permission.value.lower()
            raise ConfigError(f"--{flag}-host needs --{flag}-principal")
        for principal, host, operation in product(principals, hosts or [WILDCARD], operations):
            made.append(AclEntry(principal, host, operation, permission))
    return made


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    pattern_type = parse_pattern_type(args.resource_pattern_type)
    named = resources(args)
    if not named:
        raise ConfigError(f"name the resource: {_RESOURCE_CHOICES}")
    acl_entries = entries(args)
    if not acl_entries:
        raise ConfigError("name who: --allow-principal or --deny-principal")
    for resource_type, _ in named:
        for entry in acl_entries:
            if entry.operation not in VALID_OPERATIONS[resource_type]:
                valid = ", ".join(sorted(op.value for op in VALID_OPERATIONS[resource_type]))
                raise ConfigError(
                    f"a {resource_type.value} ACL cannot be for {entry.operation.value} "
                    f"(valid: {valid})"
                )
    return [
        AclBinding(ResourcePattern(resource_type, name, pattern_type), entry)
        for (resource_type, name), entry in product(named, acl_entries)
    ]


def _pattern_filter(text: str) -> tuple[PatternType | None, bool]:
    """(pattern type or None for any, whether to match) from --resource-pattern-type."""
    lowered = text.strip().lower()
    if lowered == ANY_PATTERN:
        return None, False
    if lowered == MATCH_PATTERN:
        return None, True
    return parse_pattern_type(text), False


def list_filters(args: argparse.Namespace) -> list[AclFilter]:
    """One filter per named resource (or one for all) and --principal (or any)."""
    pattern_type, match = _pattern_filter(args.resource_pattern_type)
    named: list[tuple[ResourceType | None, str | None]] = list(resources(args))
    if not named:
        named, pattern_type, match = [(None, None)], None, False
    principals: list[str | None] = [parse_principal(p) for p in args.principal] or [None]
    return [
        acl_filter(resource_type, name, pattern_type, match=match, principal=principal)
        for (resource_type, name), principal in product(named, principals)
    ]


def removal_filters(args: argparse.Namespace) -> list[AclFilter]:
    """Per named resource: the given entries exactly, or every entry when none is given."""
    pattern_type, match = _pattern_filter(args.resource_pattern_type)
    named = resources(args)
    if not named:
        raise ConfigError(f"name the resource: {_RESOURCE_CHOICES}")
    acl_entries = entries(args)
    if not acl_entries:
        return [acl_filter(rt, name, pattern_type, match=match) for rt, name in named]
    return [
        acl_filter(
            rt,
            name,
            pattern_type,
            match=match,
            principal=entry.principal,
            host=entry.host,
            operation=entry.operation,
            permission=entry.permission,
        )
        for (rt, name), entry in product(named, acl_entries)
    ]


# --------------------------------------------------------------------------- output


def format_acls(bindings: Iterable[AclBinding], heading: str) -> list[str]:
    """kafka-acls' listing: per resource pattern, one line per principal, host and
    permission with its operations."""
    lines = []
    for pattern, group in groupby(sorted(bindings), key=lambda b: b.pattern):
        lines.append(f"{heading} `{pattern.resource_type}:{pattern.pattern_type}:{pattern.name}`:")

        def who(entry: AclEntry) -> tuple[str, str, str]:
            return entry.principal, entry.permission, entry.host

        for (principal, permission, host), same in groupby(
            sorted((b.entry for b in group), key=who), key=who
        ):
            operations = ", ".join(
                op.value for op in sorted({e.operation for e in same}, key=_ORDER.index)
            )
            lines.append(
                f"\t{principal} has {permission} permission for operations: {operations} "
                f"from hosts: {host}"
            )
    return lines


def run(args: argparse.Namespace) -> int:
    """Flags are turned into ACLs or filters before connecting: a typo fails at once."""
    if args.action == "add":
        to_add = bindings_to_add(args)

        async def work(cluster: Cluster) -> list[str]:
            await SecurityAdmin(cluster).add_acls(to_add)
            return format_acls(to_add, "Added ACLs for resource")

    elif args.action == "remove":
        to_remove = removal_filters(args)

        async def work(cluster: Cluster) -> list[str]:
            removed = await SecurityAdmin(cluster).remove_acls(to_remove)
            return format_acls(removed, "Removed ACLs for resource") or ["No ACL matched."]

    else:
        return _list(args)

    for line in run_with_cluster(args, work):
        print(line)
    return 0


def acl_rows(bindings: Iterable[AclBinding]) -> list[list[str]]:
    """One row per ACL, by resource, then principal, then operation in Kafka's order."""

    def order(b: AclBinding) -> tuple[ResourcePattern, str, str, str, int]:
        entry = b.entry
        return (
            b.pattern,
            entry.principal,
            entry.permission,
            entry.host,
            _ORDER.index(entry.operation),
        )

    return [
        [
            b.pattern.resource_type,
            b.pattern.pattern_type,
            b.pattern.name,
            b.entry.principal,
            b.entry.permission,
            b.entry.operation,
            b.entry.host,
        ]
        for b in sorted(bindings, key=order)
    ]


def _list(args: argparse.Namespace) -> int:
    to_list = list_filters(args)

    async def work(cluster: Cluster) -> set[AclBinding]:
        admin = SecurityAdmin(cluster)
        found: set[AclBinding] = set()
        for f in to_list:
            found.update(await admin.list_acls(f))
        return found

    rows = acl_rows(run_with_cluster(args, work))
    if args.json:
        print_json(rows_as_json(LIST_COLUMNS, rows))
    elif rows:
        print_table([c.upper().replace("_", "-") for c in LIST_COLUMNS], rows)
    return 0
