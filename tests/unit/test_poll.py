"""``cluster.poll.until``, the one polling loop: it stops when the look is good enough, at the deadline (after one
last look), or when what it watches has been quiet long enough with nothing busy; it never raises on time."""

from __future__ import annotations

import time

from cluster import poll


def test_a_good_first_look_is_returned_without_looking_again() -> None:
    looks: list[int] = []
    assert poll.until(5, lambda n: looks.append(n) or n + 1, lambda n: n >= 5, wait=10, interval=0.01) == 5
    assert looks == []


def test_it_looks_again_until_done() -> None:
    assert poll.until(0, lambda n: n + 1, lambda n: n >= 3, wait=10, interval=0.001) == 3


def test_it_stops_at_the_deadline_with_one_last_look() -> None:
    started = time.monotonic()
    looks: list[float] = []

    def again(n: int) -> int:
        looks.append(time.monotonic() - started)
        return n + 1

    last = poll.until(0, again, lambda n: False, wait=0.3, interval=0.1)
    took = time.monotonic() - started
    assert 0.3 <= took < 1.5
    assert last == len(looks) >= 3
    assert looks[-1] >= 0.29  # the last sleep is cut short at the deadline, then a look is taken


def test_no_wait_means_the_first_look_only() -> None:
    assert poll.until(0, lambda n: n + 1, lambda n: False, wait=0, interval=0.1) == 0


def test_quiet_for_long_enough_ends_the_wait() -> None:
    started = time.monotonic()
    last = poll.until(0, lambda n: n + 1, lambda n: False, wait=30, interval=0.01, changed=lambda n: "same",
                      quiet=0.1)
    assert time.monotonic() - started < 5
    assert last > 0


def test_a_change_restarts_the_quiet_time_and_busy_keeps_it_waiting() -> None:
    busy_until = time.monotonic() + 0.3
    started = time.monotonic()
    poll.until(0, lambda n: n + 1, lambda n: False, wait=30, interval=0.01, changed=lambda n: "same", quiet=0.05,
               busy=lambda: time.monotonic() < busy_until)
    assert time.monotonic() - started >= 0.3
    watched = iter(["a", "b", "c", "d", "e", "e", "e", "e", "e", "e", "e", "e"])
    n = poll.until(0, lambda n: n + 1, lambda n: False, wait=30, interval=0.02, changed=lambda n: next(watched),
                   quiet=0.05)
    assert n >= 5  # quiet time counted only from the last change
