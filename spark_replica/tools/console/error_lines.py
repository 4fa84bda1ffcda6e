"""One line for an error that says the same thing many times.

The client's "no broker answered" names every broker it tried, each with the same
`ConnectionRefusedError(111, ...)` and a different address; shown as is, a dead
cluster is a wall of identical text. Here the "; "-separated parts of a message that
differ only in their addresses become one part with a count and the addresses, in the
order first seen: `no broker answered: cannot connect to … (3 times: a:1, b:2, c:3)`.

Pure: text in, text out.
"""

from __future__ import annotations

import re

PART_SEPARATOR = "; "
# Where an address is: ('127.0.0.1', 9092) as asyncio writes it, [::1]:9092, host:9092.
ADDRESS = re.compile(r"\('([^']*)', (\d+)\)|\[([0-9A-Fa-f:.]+)\]:(\d+)|\b([\w.-]+):(\d{1,5})\b")
PLACEHOLDER = "…"


def _address(match: re.Match[str]) -> str:
    quoted_host, quoted_port, v6_host, v6_port, host, port = match.groups()
    if quoted_host is not None:
        return f"{quoted_host}:{quoted_port}"
    if v6_host is not None:
        return f"[{v6_host}]:{v6_port}"
    return f"{host}:{port}"


def shape(part: str) -> str:
    """The part with its addresses taken out: parts of one shape say the same thing."""
    return ADDRESS.sub(PLACEHOLDER, part)


def addresses(part: str) -> list[str]:
    found = [_address(m) for m in ADDRESS.finditer(part)]
    return list(dict.fromkeys(found))


def collapse_error(message: str) -> str:
    """The message with its repeated parts counted once (see the module docstring).

    The first part may carry the whole message's prefix (`no broker answered: `); it is
    set aside when the rest of that part is alike to the second part.
    """
    parts = message.split(PART_SEPARATOR)
    prefix, colon, first = parts[0].partition(": ")
    if (
        colon
        and len(parts) > 1
        and not ADDRESS.search(prefix)
        and shape(parts[0]) != shape(parts[1])
        and shape(first) == shape(parts[1])
    ):
        parts[0] = first
    else:
        prefix = ""
    groups: dict[str, list[str]] = {}
    for part in parts:
        groups.setdefault(shape(part), []).append(part)
    lines = []
    for common, alike in groups.items():
        if len(alike) == 1:
            lines.append(alike[0])
            continue
        where = list(dict.fromkeys(a for part in alike for a in addresses(part)))
        where_text = f": {', '.join(where)}" if where else ""
        lines.append(f"{common} ({len(alike)} times{where_text})")
    collapsed = PART_SEPARATOR.join(lines)
    return f"{prefix}: {collapsed}" if prefix else collapsed
