"""Every flag of every `replog` command explains itself in `--help`, with its default.

The whole parser tree is walked (subcommands and their nested actions), so a flag added
anywhere without help text, or with a default its help does not state, fails here.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from brokerd.__main__ import build_parser as build_broker_parser
from spark_replica.tools.cli.main import build_parser

# Defaults that mean "not given": nothing to state in the help.
UNSTATED_DEFAULTS: tuple[object, ...] = (None, False, [], argparse.SUPPRESS)


def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    """(command path, option) for every option of `parser` and of its subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield from walk(subparser, f"{path} {name}")
        elif action.option_strings and not isinstance(action, argparse._HelpAction):
            yield path, action


# `replog broker run` execs the broker, whose flags are its own parser's.
OPTIONS = [*walk(build_parser(), "replog"), *walk(build_broker_parser(), "replog broker run")]


def option_id(item: tuple[str, argparse.Action]) -> str:
    path, action = item
    return f"{path} {'/'.join(action.option_strings)}"


def test_the_walk_reaches_nested_actions() -> None:
    commands = {path for path, _ in OPTIONS}
    assert {
        "replog topics describe",
        "replog groups reset-offsets",
        "replog acls list",
        "replog broker run",
    } <= commands
    assert len(OPTIONS) > 100


@pytest.mark.parametrize("item", OPTIONS, ids=[option_id(item) for item in OPTIONS])
def test_every_option_has_help(item: tuple[str, argparse.Action]) -> None:
    _, action = item
    assert action.help and action.help is not argparse.SUPPRESS and action.help.strip()


@pytest.mark.parametrize("item", OPTIONS, ids=[option_id(item) for item in OPTIONS])
def test_every_default_is_stated_in_the_help(item: tuple[str, argparse.Action]) -> None:
    _, action = item
    if any(
        action.default is unstated or action.default == unstated for unstated in UNSTATED_DEFAULTS
    ):
        return
    assert action.help and "default" in action.help.lower(), (
        f"default {action.default!r} not stated in {action.help!r}"
    )


def test_bootstrap_server_is_accepted_wherever_bootstrap_is() -> None:
    without_alias = [
        option_id(item)
        for item in OPTIONS
        if "--bootstrap" in item[1].option_strings
        and "--bootstrap-server" not in item[1].option_strings
    ]
    assert without_alias == []
    args = build_parser().parse_args(["topics", "list", "--bootstrap-server", "h:1"])
    assert args.bootstrap == "h:1"
