"""What a limiter reads from an answer's rate-limit headers: the three families in the
contract's order, and anything malformed ignored (logged at DEBUG), never raised."""

from __future__ import annotations

import logging
import time

import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from asyncapi_client._learning import Advertised, read_limits


def headers(**fields: str) -> CIMultiDictProxy[str]:
    """Headers as aiohttp hands them over (``X_RateLimit_Limit`` for ``X-RateLimit-Limit``)."""
    return CIMultiDictProxy(CIMultiDict({k.replace("_", "-"): v for k, v in fields.items()}))


def test_the_ietf_fields_give_remaining_reset_limit_and_window() -> None:
    said = read_limits(
        headers(RateLimit_Policy='"default";q=100;w=60', RateLimit='"default";r=42;t=17')
    )
    assert said == Advertised(42, 17.0, 100, 60.0)


def test_the_ietf_item_that_binds_most_is_read_with_its_own_policy() -> None:
    said = read_limits(
        headers(
            RateLimit_Policy='"burst";q=100;w=60, "day";q=1000;w=86400',
            RateLimit='"burst";r=50;t=30, "day";r=5;t=3600',
        )
    )
    assert said == Advertised(5, 3600.0, 1000, 86400.0)  # 720 s a request beats 0.6 s


def test_the_ietf_fields_may_come_on_several_lines() -> None:
    raw = CIMultiDict[str]()
    raw.add("RateLimit", '"a";r=9;t=4')
    raw.add("RateLimit", '"b";r=0;t=2')
    assert read_limits(CIMultiDictProxy(raw)) == Advertised(0, 2.0)


def test_the_older_split_fields_give_seconds_to_the_reset() -> None:
    said = read_limits(headers(RateLimit_Limit="30", RateLimit_Remaining="7", RateLimit_Reset="12"))
    assert said == Advertised(7, 12.0, 30)


def test_an_early_draft_limit_with_its_policy_still_gives_the_count() -> None:
    said = read_limits(
        headers(RateLimit_Limit="30, 30;w=60", RateLimit_Remaining="7", RateLimit_Reset="2.5")
    )
    assert said == Advertised(7, 2.5, 30, whole=False)


def test_the_x_fields_take_a_unix_time_above_10_to_the_9() -> None:
    at = int(time.time()) + 40
    said = read_limits(
        headers(X_RateLimit_Limit="5000", X_RateLimit_Remaining="4999", X_RateLimit_Reset=str(at))
    )
    assert said is not None
    assert (said.remaining, said.limit, said.absolute) == (4999, 5000, True)
    assert 38.0 < said.reset <= 40.0
    seconds = read_limits(headers(X_RateLimit_Remaining="3", X_RateLimit_Reset="9"))
    assert seconds == Advertised(3, 9.0)


def test_the_families_are_read_in_the_contracts_order() -> None:
    every = headers(
        RateLimit='"d";r=1;t=1',
        RateLimit_Remaining="2",
        RateLimit_Reset="2",
        X_RateLimit_Remaining="3",
        X_RateLimit_Reset="3",
    )
    assert read_limits(every) == Advertised(1, 1.0)
    split_and_x = headers(
        RateLimit_Remaining="2",
        RateLimit_Reset="2",
        X_RateLimit_Remaining="3",
        X_RateLimit_Reset="3",
    )
    assert read_limits(split_and_x) == Advertised(2, 2.0)


def test_an_answer_without_any_is_none() -> None:
    assert read_limits(headers(Content_Type="application/json")) is None
    assert read_limits({}) is None


MALFORMED = [
    # the IETF fields
    {"RateLimit": "garbage"},
    {"RateLimit": '"d";r=-1;t=5'},
    {"RateLimit": '"d";r=5;t=-5'},
    {"RateLimit": '"d";r=5'},
    {"RateLimit": '"d";t=5'},
    {"RateLimit": '"d";r=5;t=90000'},
    {"RateLimit": '"d";r=1.5;t=5'},
    {"RateLimit": '"d;r=5;t=5'},
    {"RateLimit": '"d";r=5;t=5,'},
    {"RateLimit": '"d";r=5;t=5 "e"'},
    {"RateLimit": "limit=10, remaining=5, reset=3"},
    {"RateLimit": '"d";r=' + "9" * 5000 + ";t=5"},
    {"RateLimit": ""},
    {"RateLimit": '"\\x00";r=1;t=1'},
    # the split fields
    {"RateLimit-Remaining": "five", "RateLimit-Reset": "5"},
    {"RateLimit-Remaining": "-1", "RateLimit-Reset": "5"},
    {"RateLimit-Remaining": "5", "RateLimit-Reset": "-5"},
    {"RateLimit-Remaining": "5", "RateLimit-Reset": "nan"},
    {"RateLimit-Remaining": "5", "RateLimit-Reset": "inf"},
    {"RateLimit-Remaining": "5", "RateLimit-Reset": "1e3"},
    {"RateLimit-Remaining": "5", "RateLimit-Reset": "86401"},
    {"RateLimit-Remaining": "5"},
    {"RateLimit-Remaining": "9" * 5000, "RateLimit-Reset": "5"},
    {"RateLimit-Remaining": "\u0665", "RateLimit-Reset": "5"},  # an Arabic-Indic five
    {"RateLimit-Remaining": "5", "RateLimit-Reset": "Wed, 21 Oct 2015 07:28:00 GMT"},
    # the X fields
    {"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "1000000001"},  # 2001: past
    {"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": str(int(time.time()) + 200_000)},
    {"X-RateLimit-Remaining": "0x10", "X-RateLimit-Reset": "5"},
    {"X-RateLimit-Remaining": "5 5", "X-RateLimit-Reset": "5"},
]


@pytest.mark.parametrize("fields", MALFORMED, ids=range(len(MALFORMED)))
def test_a_malformed_header_is_ignored_and_logged_never_raised(
    fields: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="asyncapi_client"):
        assert read_limits(CIMultiDictProxy(CIMultiDict(fields))) is None
    assert any("rate-limit header" in record.getMessage() for record in caplog.records)
    assert all(record.levelno == logging.DEBUG for record in caplog.records)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # a limit that does not parse, or is below what remains: the rest is read
        (
            {"RateLimit-Limit": "lots", "RateLimit-Remaining": "3", "RateLimit-Reset": "4"},
            Advertised(3, 4.0),
        ),
        (
            {"RateLimit-Limit": "2", "RateLimit-Remaining": "3", "RateLimit-Reset": "4"},
            Advertised(3, 4.0),
        ),
        (
            {"RateLimit-Policy": '"d";q=0;w=-3', "RateLimit": '"d";r=3;t=4'},
            Advertised(3, 4.0),
        ),
        (
            {"RateLimit-Policy": "?!", "RateLimit": '"d";r=3;t=4'},
            Advertised(3, 4.0),
        ),
    ],
)
def test_a_malformed_limit_alone_leaves_the_remaining_and_reset(
    fields: dict[str, str], expected: Advertised, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="asyncapi_client"):
        assert read_limits(CIMultiDictProxy(CIMultiDict(fields))) == expected
    assert caplog.records, "the ignored header is logged"
