"""The one error tree of replog.

Every error a broker can answer with is a subclass of :class:`BrokerResponseError`
carrying its wire code and two flags, ``retriable`` and ``invalid_metadata``. The
client decides whether to retry from ``retriable`` alone and whether to refresh its
metadata first from ``invalid_metadata``; it never inspects messages or types for
that. Wire codes follow Kafka's numbering so operators recognise them.

Errors that happen on this side of the wire are separate types: a protocol that
could not be decoded (:class:`ProtocolError`), a connection that broke
(:class:`ConnectionLostError`), bad user input (:class:`ConfigError`).
"""

from __future__ import annotations

from typing import ClassVar


class ReplogError(Exception):
    """Base of every error raised by replog."""

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False


class ConfigError(ReplogError, ValueError):
    """An option, argument or setting had a bad value; the message says which and why."""


class ProtocolError(ReplogError):
    """Bytes on the wire (or on disk) could not be decoded as the format says."""


class CorruptRecordError(ProtocolError):
    """A record batch failed its length or CRC32C check."""


class ConnectionLostError(ReplogError):
    """The connection to a broker closed or failed; the request may or may not have landed."""

    retriable = True
    invalid_metadata = True


class TimeoutExpiredError(ReplogError):
    """A client-side deadline passed before the work was done."""

    retriable = True


class DeliveryTimeoutError(TimeoutExpiredError):
    """A producer gave up on records at its delivery timeout, after retrying.

    The message names the cause in words; `last_error` is the error the last attempt
    ended with (None if the records were never sent), and `maybe_stored` says whether
    some attempt may have been appended, in which case readers may still see them.
    """

    def __init__(
        self, message: str, last_error: BaseException | None = None, *, maybe_stored: bool
    ) -> None:
        super().__init__(message)
        self.last_error = last_error
        self.maybe_stored = maybe_stored


class NetworkSetupError(ReplogError):
    """Network namespaces, links or traffic rules for separate hosts on one machine could
    not be created or changed; the message names the command that failed and why."""


class NetnsUnavailableError(NetworkSetupError):
    """This machine cannot make network namespaces for us (not root, no iproute2, or the
    kernel refuses); nothing was created."""


class ZooKeeperError(ReplogError):
    """ZooKeeper could not be started or reached, or held data we could not read."""


class ZnodeMissingError(ZooKeeperError):
    """The znode does not exist (ZooKeeper's NONODE)."""


class ZnodeExistsError(ZooKeeperError):
    """The znode to create exists already (ZooKeeper's NODEEXISTS)."""


class ZnodeVersionError(ZooKeeperError):
    """A conditional write found another zkVersion: someone wrote the znode since."""


class MultiReadError(ZooKeeperError):
    """A multiRead answer that does not parse: ZooKeeper and this client disagree."""


class ZnodeNoAuthError(ZooKeeperError):
    """The znode's ACL does not let this session do that (ZooKeeper's NOAUTH): the session
    lacks the digest credentials the znode was written with."""


class ElectionInProgressError(ZooKeeperError):
    """Another preferred replica election is still waiting for the controller: ZooKeeper
    holds one request at a time, so this one can only be written once that is done."""


class ZooKeeperConnectionError(ZooKeeperError):
    """The connection or session was lost; a write in flight may or may not have landed."""

    retriable = True


class BrokerResponseError(ReplogError):
    """An error code answered by a broker."""

    code: ClassVar[int] = -1

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__doc__ or self.__class__.__name__)


class UnknownServerError(BrokerResponseError):
    """The broker hit an unexpected error while serving the request; see its log."""

    code = -1


class OffsetOutOfRangeError(BrokerResponseError):
    """The requested offset is past the log end offset or before the log start offset."""

    code = 1


class CorruptMessageError(BrokerResponseError):
    """A record batch failed its CRC32C or length check; nothing from it was appended."""

    code = 2
    retriable = True


class UnknownTopicOrPartitionError(BrokerResponseError):
    """This broker does not host that topic-partition (it may not exist yet)."""

    code = 3
    retriable = True
    invalid_metadata = True


class InvalidFetchSizeError(BrokerResponseError):
    """The fetch size must be positive."""

    code = 4


class LeaderNotAvailableError(BrokerResponseError):
    """The partition has no leader right now (an election may be in progress)."""

    code = 5
    retriable = True
    invalid_metadata = True


class NotLeaderOrFollowerError(BrokerResponseError):
    """This broker is not the leader of the partition; refresh metadata and retry."""

    code = 6
    retriable = True
    invalid_metadata = True


class RequestTimedOutError(BrokerResponseError):
    """The broker could not complete the request within its timeout."""

    code = 7
    retriable = True


class BrokerNotAvailableError(BrokerResponseError):
    """The broker is starting or stopping and cannot serve this yet."""

    code = 8
    retriable = True


class MessageTooLargeError(BrokerResponseError):
    """A batch or a request frame is larger than the broker accepts."""

    code = 10


class StaleControllerEpochError(BrokerResponseError):
    """The request comes from a controller older than one this broker has heard from."""

    code = 11


class InvalidTopicError(BrokerResponseError):
    """Topic names are 1-249 characters of ASCII letters, digits, '.', '_' and '-'."""

    code = 17


class RecordListTooLargeError(BrokerResponseError):
    """The record list of one partition is larger than the broker accepts."""

    code = 18


class NotEnoughReplicasError(BrokerResponseError):
    """The in-sync replica set is smaller than min.insync.replicas; nothing was appended."""

    code = 19
    retriable = True


class InvalidCommitOffsetSizeError(BrokerResponseError):
    """An offset commit too large for the offsets topic to store (Kafka's code 28)."""

    code = 28


class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    """Appended, but the in-sync replica set shrank below min.insync.replicas before commit."""

    code = 20
    retriable = True


class InvalidRequiredAcksError(BrokerResponseError):
    """acks must be 0, 1 or -1 (all)."""

    code = 21


class InvalidTimestampError(BrokerResponseError):
    """A timestamp in the request is out of the accepted range."""

    code = 32


class UnsupportedVersionError(BrokerResponseError):
    """The broker does not support this API key or version; see ApiVersions."""

    code = 35


class TopicAlreadyExistsError(BrokerResponseError):
    """A topic with this name already exists."""

    code = 36


class InvalidPartitionsError(BrokerResponseError):
    """The number of partitions must be at least 1."""

    code = 37


class InvalidReplicationFactorError(BrokerResponseError):
    """The replication factor must be at least 1 and at most the number of live brokers."""

    code = 38


class InvalidReplicaAssignmentError(BrokerResponseError):
    """A replica assignment names unknown or dead brokers, repeats one, or is empty."""

    code = 39


class InvalidConfigError(BrokerResponseError):
    """A config key is unknown or its value is invalid; the message names it."""

    code = 40


class NotControllerError(BrokerResponseError):
    """This broker is not the controller; find the current one and ask it."""

    code = 41
    retriable = True


class InvalidRequestError(BrokerResponseError):
    """The request was well framed but its contents are invalid; the message says what."""

    code = 42


class OutOfOrderSequenceError(BrokerResponseError):
    """The batch's sequence number leaves a gap after the producer's last one; not appended.

    Not retriable: a retry carries the same sequence, so the producer must reset first.
    """

    code = 45


class DuplicateSequenceNumberError(BrokerResponseError):
    """The batch repeats sequence numbers appended long ago; it was not appended again.

    Its sequence range lies wholly before the producer's latest batches, which the
    leader remembers with their offsets; older batches it only knows were appended, so
    it cannot say at which offsets. A producer counts this as delivered at offset -1.
    """

    code = 46


class InvalidProducerEpochError(BrokerResponseError):
    """The producer's epoch is older than its latest one: a newer instance fenced it."""

    code = 47


class UnknownProducerIdError(BrokerResponseError):
    """The partition has no state for this producer id and the batch is not its first.

    Its earlier batches may have been deleted by retention; the producer must ask for a
    new producer id (or bump its epoch) and start again at sequence 0.
    """

    code = 59


class FencedLeaderEpochError(BrokerResponseError):
    """The request's leader epoch is older than the broker's; refresh metadata."""

    code = 74
    retriable = True
    invalid_metadata = True


class UnknownLeaderEpochError(BrokerResponseError):
    """The request's leader epoch is newer than the broker's; retry after a moment."""

    code = 75
    retriable = True
    invalid_metadata = True


class ReassignmentInProgressError(BrokerResponseError):
    """A partition reassignment is already running; wait for it to finish first."""

    code = 60


class StaleBrokerEpochError(BrokerResponseError):
    """The request was meant for an earlier incarnation of this broker."""

    code = 77


class InvalidRecordError(BrokerResponseError):
    """A record batch is well formed but breaks a rule (e.g. offsets, counts)."""

    code = 87


class InvalidControlRecordError(InvalidRecordError):
    """A control batch does not hold exactly one end transaction marker as Kafka lays it
    out (key: version 0 and type ABORT 0 or COMMIT 1; value: version 0 and the
    coordinator epoch), so which way its transaction ended is unknown."""


class AuthenticationError(ReplogError):
    """The connection could not be authenticated: TLS or SASL failed. Not retriable: the
    same settings fail the same way, so the client stops and says why."""


class SslHandshakeError(AuthenticationError):
    """The TLS handshake failed (untrusted certificate, wrong host name, or a listener that
    does not speak TLS)."""


class TopicAuthorizationFailedError(BrokerResponseError):
    """The principal may not do this to the topic (an ACL denies it or none allows it)."""

    code = 29


class GroupAuthorizationFailedError(BrokerResponseError):
    """The principal may not do this to the group."""

    code = 30


class ClusterAuthorizationFailedError(BrokerResponseError):
    """The principal may not do this to the cluster."""

    code = 31


class UnsupportedSaslMechanismError(BrokerResponseError, AuthenticationError):
    """The broker does not enable the SASL mechanism the client asked for."""

    code = 33


class IllegalSaslStateError(BrokerResponseError, AuthenticationError):
    """A request arrived out of the SASL exchange's order (e.g. before authenticating)."""

    code = 34


class SecurityDisabledError(BrokerResponseError):
    """The request needs security features the broker does not have enabled."""

    code = 54


class SaslAuthenticationFailedError(BrokerResponseError, AuthenticationError):
    """Authentication failed: wrong user name or password, or a protocol mismatch."""

    code = 58


class ResourceNotFoundError(BrokerResponseError):
    """The resource the request names does not exist (e.g. a user's SCRAM credential)."""

    code = 91


class DuplicateResourceError(BrokerResponseError):
    """The request names the same resource twice (e.g. one user credential altered twice)."""

    code = 92


class UnacceptableCredentialError(BrokerResponseError):
    """A SCRAM credential breaks a rule (empty user name, iterations out of range, bad salt)."""

    code = 93


class CoordinatorLoadInProgressError(BrokerResponseError):
    """The group coordinator is still reading the group's committed offsets; retry."""

    code = 14
    retriable = True


class CoordinatorNotAvailableError(BrokerResponseError):
    """No live broker can coordinate the group right now; find the coordinator again."""

    code = 15
    retriable = True


class NotCoordinatorError(BrokerResponseError):
    """This broker does not coordinate that group (any more); find the coordinator again."""

    code = 16
    retriable = True


class OffsetMetadataTooLargeError(BrokerResponseError):
    """The metadata committed with an offset is over offset.metadata.max.bytes."""

    code = 12


class IllegalGenerationError(BrokerResponseError):
    """The member's generation is not the group's: the group rebalanced; rejoin."""

    code = 22


class InconsistentGroupProtocolError(BrokerResponseError):
    """The member's protocol type or assignors share nothing with the group's members."""

    code = 23


class InvalidGroupIdError(BrokerResponseError):
    """The group id is empty or otherwise unusable."""

    code = 24


class UnknownMemberIdError(BrokerResponseError):
    """The coordinator does not know this member (it left, timed out, or the coordinator
    moved); rejoin with an empty member id."""

    code = 25


class InvalidSessionTimeoutError(BrokerResponseError):
    """The session timeout is outside group.min.session.timeout.ms..group.max.session.timeout.ms."""

    code = 26


class RebalanceInProgressError(BrokerResponseError):
    """The group is rebalancing; rejoin before committing or heartbeating."""

    code = 27


class UnsupportedForMessageFormatError(BrokerResponseError):
    """The records use a message format replog does not accept (only v2 batches)."""

    code = 43


class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    """The principal may not use (Write) or see (Describe) this transactional id, or sent
    transactional records without one."""

    code = 53


# The transaction coordinator's answers (brokerd/transactions), Kafka's codes.
class InvalidTxnStateError(BrokerResponseError):
    """The request does not fit the transaction's state: ending a transaction that was
    never begun, committing one that is being aborted, or (at a partition leader) a
    producer with a transaction open there sending a batch outside it."""

    code = 48


class InvalidProducerIdMappingError(BrokerResponseError):
    """The producer id is not the one the transactional id holds; call
    init_transactions again."""

    code = 49


class InvalidTransactionTimeoutError(BrokerResponseError):
    """The transaction timeout is not positive or is over transaction.max.timeout.ms."""

    code = 50


class ConcurrentTransactionsError(BrokerResponseError):
    """The transactional id's previous transaction is still completing; retry shortly."""

    code = 51
    retriable = True


class TransactionCoordinatorFencedError(BrokerResponseError):
    """A transaction marker comes from a coordinator epoch older than one the partition
    has already seen for the producer: a newer coordinator took over the transactional id."""

    code = 52


class ProducerFencedError(BrokerResponseError):
    """A newer producer with the same transactional.id took over; this one must close."""

    code = 90


class TransactionStateError(ReplogError):
    """A transactional producer's call out of its order: a send or commit outside a
    transaction, begin_transaction inside one, anything before init_transactions."""


class TransactionAbortableError(ReplogError):
    """The open transaction failed (the cause is attached) and can only be aborted:
    call abort_transaction, then begin a new one and send its records again."""


class OperationNotAttemptedError(BrokerResponseError):
    """Not tried because another part of the same request failed: an AddPartitionsToTxn
    adds all of its partitions or none."""

    code = 55


class TransactionalIdNotFoundError(BrokerResponseError):
    """The coordinator holds no state for that transactional id."""

    code = 105


class NonEmptyGroupError(BrokerResponseError):
    """The group still has members; stop them before deleting or resetting it."""

    code = 68


class GroupIdNotFoundError(BrokerResponseError):
    """No group of that id exists (no members and no committed offsets)."""

    code = 69


class UnsupportedCompressionTypeError(BrokerResponseError):
    """The batch names a compression codec replog cannot decode."""

    code = 76


class MemberIdRequiredError(BrokerResponseError):
    """Rejoin with the member id this answer assigned (JoinGroup v4+ two-step join)."""

    code = 79


class UnstableOffsetCommitError(BrokerResponseError):
    """The group has offsets committed in a transaction not yet ended on the partition
    (OffsetFetch with require_stable); retry once the transaction is over."""

    code = 88
    retriable = True


class GroupMaxSizeReachedError(BrokerResponseError):
    """The group has group.max.size members already."""

    code = 81


class FencedInstanceIdError(BrokerResponseError):
    """Another member joined with the same group.instance.id; this one is fenced."""

    code = 82


_BY_CODE: dict[int, type[BrokerResponseError]] = {
    cls.code: cls
    for cls in (
        UnknownServerError,
        OffsetOutOfRangeError,
        CorruptMessageError,
        UnknownTopicOrPartitionError,
        InvalidFetchSizeError,
        LeaderNotAvailableError,
        NotLeaderOrFollowerError,
        RequestTimedOutError,
        BrokerNotAvailableError,
        MessageTooLargeError,
        InvalidCommitOffsetSizeError,
        StaleControllerEpochError,
        InvalidTopicError,
        RecordListTooLargeError,
        NotEnoughReplicasError,
        NotEnoughReplicasAfterAppendError,
        InvalidRequiredAcksError,
        InvalidTimestampError,
        UnsupportedVersionError,
        TopicAlreadyExistsError,
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        InvalidReplicaAssignmentError,
        InvalidConfigError,
        NotControllerError,
        InvalidRequestError,
        OutOfOrderSequenceError,
        DuplicateSequenceNumberError,
        InvalidProducerEpochError,
        UnknownProducerIdError,
        FencedLeaderEpochError,
        UnknownLeaderEpochError,
        ReassignmentInProgressError,
        StaleBrokerEpochError,
        InvalidRecordError,
        TopicAuthorizationFailedError,
        GroupAuthorizationFailedError,
        ClusterAuthorizationFailedError,
        UnsupportedSaslMechanismError,
        IllegalSaslStateError,
        SecurityDisabledError,
        SaslAuthenticationFailedError,
        ResourceNotFoundError,
        DuplicateResourceError,
        UnacceptableCredentialError,
        CoordinatorLoadInProgressError,
        CoordinatorNotAvailableError,
        NotCoordinatorError,
        OffsetMetadataTooLargeError,
        IllegalGenerationError,
        InconsistentGroupProtocolError,
        InvalidGroupIdError,
        UnknownMemberIdError,
        InvalidSessionTimeoutError,
        RebalanceInProgressError,
        UnsupportedForMessageFormatError,
        TransactionalIdAuthorizationFailedError,
        InvalidTxnStateError,
        InvalidProducerIdMappingError,
        InvalidTransactionTimeoutError,
        ConcurrentTransactionsError,
        TransactionCoordinatorFencedError,
        ProducerFencedError,
        OperationNotAttemptedError,
        TransactionalIdNotFoundError,
        NonEmptyGroupError,
        GroupIdNotFoundError,
        UnsupportedCompressionTypeError,
        MemberIdRequiredError,
        UnstableOffsetCommitError,
        GroupMaxSizeReachedError,
        FencedInstanceIdError,
    )
}

NONE = 0


def error_for_code(code: int, message: str = "") -> BrokerResponseError:
    """The exception for a wire error code; unknown codes become UnknownServerError."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return UnknownServerError(f"unknown error code {code}: {message}".rstrip(": "))
    return cls(message)


def raise_for_code(code: int, message: str = "") -> None:
    """Raise the typed error for a non-zero wire code; do nothing for 0."""
    if code != NONE:
        raise error_for_code(code, message)


# Messages can echo user input; on the wire they are cut to this many characters.
MAX_WIRE_MESSAGE_CHARS = 1000


def wire_message(error: BaseException) -> str:
    """The text sent with an error code: the error's message, cut to a bounded length."""
    return str(error)[:MAX_WIRE_MESSAGE_CHARS]


def code_of(error: BaseException) -> int:
    """The wire code to answer for an exception raised while serving a request."""
    if isinstance(error, BrokerResponseError):
        return error.code
    if isinstance(error, CorruptRecordError):
        return CorruptMessageError.code
    if isinstance(error, ConfigError):
        return InvalidConfigError.code
    if isinstance(error, ZooKeeperConnectionError):
        # ZooKeeper went away mid-request: whether a write landed is unknown, as after a
        # timeout, and trying again later is right (Kafka answers REQUEST_TIMED_OUT too).
        return RequestTimedOutError.code
    return UnknownServerError.code


class BufferExhaustedError(TimeoutExpiredError):
    """A producer's send waited max_block_ms for room in buffer.memory and found none.

    The records already sent are still being delivered; this one was not taken.
    """


class RecordsLostError(ReplogError):
    """Records a reader of an exact offset range expected are gone: retention deleted
    them, the log was truncated below them, or their partition was deleted.

    Carries the lost offsets [start, end) of `topic`/`partition`, so a caller can say
    what was lost or decide to go on without them.
    """

    def __init__(self, message: str, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


class ClientClosedError(ReplogError):
    """A call on a client after its close(): it has no connections or thread any more."""
