"""AddOffsetsToTxn and EndTxn: the two transaction requests whose only outcome is their
top-level error code (their response is EmptyResponse).

AddOffsetsToTxn: the transactional id, the producer id and epoch, and the consumer group
whose offsets the transaction will commit (`send_offsets_to_transaction`): the group's
`__consumer_offsets` partition joins the transaction. EndTxn: the transactional id, the
producer id and epoch, and whether to commit (true) or abort (false) the open
transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import wire_field
from spark_replica.wire.schema import Tabled, tabled

_PRODUCER = (
    wire_field("transactional_id", "string"),
    wire_field("producer_id", "int64"),
    wire_field("producer_epoch", "int16"),
)


@tabled(*_PRODUCER, wire_field("group_id", "string"))
@dataclass(slots=True)
class AddOffsetsToTxnRequest(Tabled):
    API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@tabled(*_PRODUCER, wire_field("committed", "bool"))
@dataclass(slots=True)
class EndTxnRequest(Tabled):
    API_KEY = ApiKey.END_TXN
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
