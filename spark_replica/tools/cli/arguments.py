"""Flags every command spells the same way, and the checks argparse cannot make alone.

A topic is named as `replog topics` always took it, a positional TOPIC, or as Kafka's
tools take it, `--topic TOPIC`; each command that names one topic accepts both, and
refuses two different names. A mistake in a subcommand's flags is reported with that
subcommand's usage (`replog topics create: ...`), not the top-level one, whichever check
finds it.
"""

from __future__ import annotations

import argparse

TOPIC_OPTION = "topic_option"


def add_topic_argument(
    parser: argparse.ArgumentParser, help_text: str, *, required: bool = True
) -> None:
    """TOPIC or --topic TOPIC, resolved into `args.topic` by resolve()."""
    parser.add_argument("topic", nargs="?", metavar="TOPIC", help=f"{help_text} (or --topic)")
    parser.add_argument(
        "--topic",
        dest=TOPIC_OPTION,
        metavar="TOPIC",
        help="the same as TOPIC, as Kafka's tools name it",
    )
    parser.set_defaults(topic_required=required)


def leaf_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The (sub)parser of the command `args` were parsed for, followed down its
    subcommands (`replog topics create` -> the `create` parser)."""
    while True:
        chosen = None
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(args, action.dest, None) or "")
        if chosen is None:
            return parser
        parser = chosen


def resolve(parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: list[str]) -> None:
    """Finish what argparse left: unknown flags and the topic's two spellings, each
    refused with the usage of the command that was run (exit 2)."""
    command = leaf_parser(parser, args)
    if unknown and not getattr(args, "forwards_arguments", False):
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    if not hasattr(args, TOPIC_OPTION):
        return
    positional, option = args.topic, getattr(args, TOPIC_OPTION)
    if positional is not None and option is not None and positional != option:
        command.error(f"two topics given: {positional} and --topic {option}; name one")
    args.topic = positional if positional is not None else option
    if args.topic is None and args.topic_required:
        command.error("the topic is required: give it as TOPIC or --topic TOPIC")
