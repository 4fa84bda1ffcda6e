"""Which Kafka APIs and versions the listener serves, and each one's tables.

Built from the message modules: a table's version range is exactly what is served, so
ApiVersions advertises what the codec can read and write and nothing else.
"""

from __future__ import annotations

from spark_replica.wire.kafka.messages import acls, admin, core, groups, sasl, transactions
from spark_replica.wire.schema import Message

_MODULES = [core, admin, sasl, groups, acls, transactions]

REQUESTS: dict[int, Message] = {m.api_key: m for module in _MODULES for m in module.REQUESTS}
RESPONSES: dict[int, Message] = {m.api_key: m for module in _MODULES for m in module.RESPONSES}
SERVED: dict[int, tuple[int, int]] = {key: message.versions for key, message in REQUESTS.items()}


def is_flexible(api_key: int, version: int) -> bool:
    """Whether this API at this version uses compact encodings and tagged fields.

    Known for any version of a tabled API, served or not, so that the header of a
    request we cannot serve is still read right; False for an unknown API.
    """
    message = REQUESTS.get(api_key)
    return message is not None and message.is_flexible(version)
