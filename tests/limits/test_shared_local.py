"""One LocalLimiter shared by two SyncClients (each runs its own event loop): every call
works, and the rate holds across both where the requests land (the kernel's receive time
at a loopback server)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from asyncapi_client import LocalLimiter, Rate, SyncClient
from tests._arrivals import ArrivalServer
from tests._windows import most_in_any_window, timeline

#: Ten requests in any half second: short windows keep the run short.
RATE = Rate(10, 0.5)
#: Calls each of the six threads makes: several windows' worth in all.
CALLS = 6
#: Every wait is bounded by this (seconds); none paces the test.
BOUND = 60.0


def test_two_sync_clients_share_one_local_limiter() -> None:
    limiter = LocalLimiter([RATE])
    errors: list[BaseException] = []

    def caller(client: SyncClient) -> Callable[[], None]:
        def run() -> None:
            try:
                for _ in range(CALLS):
                    client.tokens()
            except BaseException as exc:
                errors.append(exc)

        return run

    with ArrivalServer() as server:
        options = {"base_url": server.base_url, "limiter": limiter, "coalesce": False}
        with SyncClient(**options) as one, SyncClient(**options) as other:  # type: ignore[arg-type]
            threads = [threading.Thread(target=caller(c)) for c in (one, other) * 3]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(BOUND)
            assert not any(thread.is_alive() for thread in threads), "a caller never finished"
        arrivals = [a for a in server.arrivals if a.path == "/api/tokens"]
    assert errors == []
    assert all(arrival.kernel for arrival in arrivals), "not stamped by the kernel"
    landed = [arrival.time for arrival in arrivals]
    assert len(landed) == 6 * CALLS
    assert most_in_any_window(landed, RATE.seconds) <= RATE.count + 1, timeline(landed)
