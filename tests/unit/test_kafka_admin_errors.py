"""The admin client's errors for answers that carry only a code: typed as the code says,
one line naming what was asked and what the code means."""

from __future__ import annotations

import pytest

from spark_replica.client.kafka_admin import raise_for_answer
from spark_replica.errors import (
    OperationNotAttemptedError,
    TransactionalIdNotFoundError,
    UnknownServerError,
)


def test_no_error_raises_nothing() -> None:
    raise_for_answer(0, "transactional id 'tx'")


def test_the_error_names_its_subject_and_the_codes_meaning() -> None:
    with pytest.raises(TransactionalIdNotFoundError) as raised:
        raise_for_answer(TransactionalIdNotFoundError.code, "transactional id 'tx'")
    assert str(raised.value) == (
        "transactional id 'tx': The coordinator holds no state for that transactional id."
    )


def test_a_meaning_written_on_several_lines_is_told_on_one() -> None:
    with pytest.raises(OperationNotAttemptedError) as raised:
        raise_for_answer(OperationNotAttemptedError.code, "partition t-0")
    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith("partition t-0: Not tried because")


def test_an_unknown_code_is_an_unknown_server_error_that_keeps_the_code() -> None:
    with pytest.raises(UnknownServerError) as raised:
        raise_for_answer(9_999, "listing transactions on broker 1")
    assert str(raised.value) == "listing transactions on broker 1: unknown error code 9999"
