"""Two server objects sharing one note store and one replay store race on one confirmation.

Threads are released together by a barrier (no sleeps). Exactly one deletion may happen per
confirmation. A control run with a check-then-set replay store, whose gap the barrier holds
open, shows the harness really observes a double execution when the store is not atomic.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from helpers import (
    DECLINE,
    STATE_FAILURE,
    Lab,
    accept,
    ask,
    build_lab,
    call_message,
    error_of,
    send,
    structured,
)

from labkit.clock import FakeClock
from labkit.server import Server
from labkit.stores import Claim

TPS_IDS = {"note-3", "note-7", "note-14"}


def race(contenders: Sequence[tuple[Server, dict[str, Any]]], state: str) -> list[dict[str, Any]]:
    """Send one retry per contender, all released at the same instant; return the answers."""
    barrier = threading.Barrier(len(contenders), timeout=30)
    responses: list[dict[str, Any] | None] = [None] * len(contenders)
    failures: list[BaseException] = []

    def retry(index: int, server: Server, responses_: dict[str, Any]) -> None:
        try:
            barrier.wait()
            message = call_message(100 + index, state=state, responses=responses_)
            responses[index] = send(server, message)
        except BaseException as exc:  # re-raised in the test thread below
            failures.append(exc)

    threads = [
        threading.Thread(target=retry, args=(index, server, responses_))
        for index, (server, responses_) in enumerate(contenders)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    if failures:
        raise failures[0]
    assert all(r is not None for r in responses)
    return [r for r in responses if r is not None]


def outcome(response: dict[str, Any]) -> str:
    if "error" in response:
        assert error_of(response) == STATE_FAILURE
        return "refused"
    status: str = structured(response)["status"]
    return status


def test_two_servers_two_notes_one_state_exactly_one_deletion() -> None:
    for _ in range(100):
        lab = build_lab()
        other = lab.twin()
        state = ask(lab)
        answers = race([(lab.server, accept("note-7")), (other, accept("note-14"))], state)
        assert sorted(outcome(r) for r in answers) == ["deleted", "refused"]
        gone = TPS_IDS - set(lab.ids())
        assert len(gone) == 1
        (winner,) = [r for r in answers if "result" in r]
        assert structured(winner)["noteId"] in gone


def test_many_contenders_on_two_servers_exactly_one_deletion() -> None:
    choices = ["note-3", "note-7", "note-14", "note-7"]
    for _ in range(40):
        lab = build_lab()
        other = lab.twin()
        state = ask(lab)
        contenders = [(lab.server, accept(n)) for n in choices]
        contenders += [(other, accept(n)) for n in reversed(choices)]
        answers = race(contenders, state)
        assert sorted(outcome(r) for r in answers) == ["deleted"] + ["refused"] * 7
        assert len(TPS_IDS - set(lab.ids())) == 1
        assert {"note-99", "note-100"} <= set(lab.ids())


def test_a_decline_racing_an_accept_either_wins_never_both() -> None:
    for _ in range(60):
        lab = build_lab()
        other = lab.twin()
        state = ask(lab)
        answers = race([(lab.server, DECLINE), (other, accept("note-14"))], state)
        outcomes = sorted(outcome(r) for r in answers)
        assert outcomes in (["declined", "refused"], ["deleted", "refused"])
        # Which side wins is up to the scheduler; the note survives exactly when decline won.
        assert ("note-14" in lab.ids()) == ("declined" in outcomes)


class CheckThenSetReplay:
    """The classic non-atomic replay check, with its gap held open by a barrier.

    Both callers look up the nonce before either records it, as an unlucky scheduler would
    arrange. Used only as a control for the harness.
    """

    def __init__(self, parties: int) -> None:
        self.claimed: set[tuple[str, str]] = set()
        self.gap = threading.Barrier(parties, timeout=30)

    def claim(self, principal: str, nonce: str, expires_at: float) -> Claim:
        already = (principal, nonce) in self.claimed
        self.gap.wait()
        if already:
            return Claim.USED
        self.claimed.add((principal, nonce))
        return Claim.CLAIMED

    def release(self, principal: str, nonce: str) -> None:
        self.claimed.discard((principal, nonce))


def test_control_a_non_atomic_store_lets_both_servers_delete(clock: FakeClock) -> None:
    lab: Lab = build_lab(clock, replay=CheckThenSetReplay(parties=2))
    other = lab.twin()
    state = ask(lab)
    answers = race([(lab.server, accept("note-7")), (other, accept("note-14"))], state)
    assert sorted(outcome(r) for r in answers) == ["deleted", "deleted"]
    assert TPS_IDS - set(lab.ids()) == {"note-7", "note-14"}
