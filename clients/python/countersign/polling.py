"""How the client waits: the one schedule of every poll and retry.

Whatever is asked again and again — a pending call, a proposal being waited
for, a watched thread, a request that failed — follows one schedule, kept
by a :class:`Pacer` (one per thing waited for):

- The pause before the next request starts at ``MIN_DELAY`` (0.5 s) and
  doubles with each request, up to ``MAX_DELAY`` (30 s). Each pause is
  jittered by ``JITTER`` (±25 %, kept within 0.5–30 s), so that many clients
  that began together do not keep asking in step.
- A pause counts from the start of the request before it: a long-poll the
  server held is time already waited, so a long-poll answered at the end of
  its ``wait_seconds`` is followed at once by the next.
- Two requests never start less than ``MIN_INTERVAL`` (1 s) apart, however
  fast the answer came: a long-poll cut short, a server or proxy that does
  not hold, an answer that came back at once cannot make a tight loop.
- A ``Retry-After`` (seconds or an HTTP date) holds the next request back at
  least that long after the answer that carried it.
- Progress (the call moved on to another status, a watched thread changed)
  starts the pauses again from ``MIN_DELAY``; the 1 s floor stays.

:class:`Pacing` holds the numbers and the clock, sleep and random source
(inject a fake clock in tests); ``Client(pacing=…)`` and ``gated(pacing=…)``
take one. The event stream reconnects after ``Retry-After`` when the answer
gave one, else the caller's delay, else the server's ``retry:``, else 2 s,
and after further failures in a row on this schedule
(:func:`reconnect_pause`). A long-poll asks for at most
``MAX_WAIT_SECONDS`` (60) at a time.
"""

from __future__ import annotations

import random as _random
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, TypeVar

from .errors import CountersignError

__all__ = [
    "MIN_DELAY",
    "MAX_DELAY",
    "MAX_BACKOFF",
    "MIN_INTERVAL",
    "JITTER",
    "MAX_WAIT_SECONDS",
    "DEFAULT_RETRY",
    "Pacing",
    "Pacer",
    "delay",
    "reconnect_delay",
    "reconnect_pause",
    "retried",
    "transient",
    "unsupported",
]

#: The first pause of the schedule, in seconds.
MIN_DELAY = 0.5
#: The longest pause of the schedule, in seconds.
MAX_DELAY = 30.0
#: The longest pause (the name of earlier versions).
MAX_BACKOFF = MAX_DELAY
#: The least time between the starts of two requests for one thing, in seconds.
MIN_INTERVAL = 1.0
#: How far a pause is moved at random: ±25 %.
JITTER = 0.25
#: The longest wait_seconds the server takes.
MAX_WAIT_SECONDS = 60
#: The event stream's reconnect delay when nobody says otherwise, in seconds.
DEFAULT_RETRY = 2.0
#: How many times :func:`retried` asks before it gives up.
RETRIES = 8

T = TypeVar("T")


def delay(attempt: int, rand: float = 0.5, *, base: float = MIN_DELAY, cap: float = MAX_DELAY) -> float:
    """The pause after ``attempt`` earlier pauses (0: the first): ``base``
    doubled ``attempt`` times, at most ``cap``, moved by ``rand`` (0 ≤ rand < 1;
    0.5 moves it not at all) within ±JITTER, and kept within [base, cap]."""
    step = cap if attempt >= 64 else min(cap, base * 2.0**attempt)
    jittered = step * (1.0 + JITTER * (2.0 * rand - 1.0))
    return min(cap, max(base, jittered))


def _sleep_or_stop(seconds: float, stop: Optional[threading.Event]) -> bool:
    if stop is not None:
        return stop.wait(seconds)
    time.sleep(seconds)
    return False


@dataclass(frozen=True)
class Pacing:
    """The schedule's numbers, and the clock it runs on.

    ``clock`` is a monotonic clock in seconds, ``sleep(seconds)`` waits on
    it (None: the real sleep, which a waiter's stop event cuts short),
    ``random()`` draws the jitter in [0, 1) and ``wall()`` is the time of day
    (what a Retry-After HTTP date is counted from). The defaults are the real
    ones; a test passes a fake clock's. ``min_interval`` is never below 1 s: that bound is
    the API's promise to the server (one request a second for one pending
    call, at most)."""

    base: float = MIN_DELAY
    cap: float = MAX_DELAY
    min_interval: float = MIN_INTERVAL
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    sleep: Optional[Callable[[float], None]] = field(default=None, repr=False)
    random: Callable[[], float] = field(default=_random.random, repr=False)
    wall: Callable[[], float] = field(default=time.time, repr=False)

    def __post_init__(self) -> None:
        if not (self.base > 0) or not (self.cap >= self.base) or self.cap == float("inf"):
            raise ValueError("Pacing: want 0 < base <= cap, both finite")
        if not (self.min_interval >= MIN_INTERVAL):
            raise ValueError(f"Pacing: min_interval must be at least {MIN_INTERVAL} s")

    def pacer(self) -> "Pacer":
        """A schedule for one thing waited for (one pending call, one proposal, one thread)."""
        return Pacer(self)

    def delay(self, attempt: int) -> float:
        """The jittered pause after ``attempt`` earlier ones (see :func:`delay`)."""
        return delay(attempt, self.random(), base=self.base, cap=self.cap)

    def pause(self, seconds: float, stop: Optional[threading.Event] = None) -> bool:
        """Waits ``seconds`` (at once when not positive); True when ``stop``
        was set meanwhile. With the real sleep a set ``stop`` ends the wait early."""
        if stop is not None and stop.is_set():
            return True
        if seconds > 0:
            if self.sleep is None:
                return _sleep_or_stop(seconds, stop)
            self.sleep(seconds)
        return stop is not None and stop.is_set()


class Pacer:
    """When the next request for one thing may start (see the module's rules).

    Call :meth:`wait` before every request: the first goes at once, each
    later one after its pause. :meth:`retry_after` records a server's
    Retry-After, :meth:`reset` progress. Not safe for use by several threads
    at once: each waiter has its own."""

    def __init__(self, pacing: Pacing) -> None:
        self.pacing = pacing
        #: Pauses taken since the start or the last reset.
        self.attempt = 0
        #: Requests let through so far.
        self.requests = 0
        self._last: Optional[float] = None
        self._not_before: Optional[float] = None

    def reset(self) -> None:
        """Progress: the next pause is the first of the schedule again."""
        self.attempt = 0

    def retry_after(self, seconds: Optional[float]) -> None:
        """The server asked to wait ``seconds`` from now (None: it did not say)."""
        if seconds is None:
            return
        t = self.pacing.clock() + max(0.0, float(seconds))
        self._not_before = t if self._not_before is None else max(self._not_before, t)

    def next_start(self) -> float:
        """When the next request may start, on the pacing's clock; it draws
        the next pause, so call it once per request (wait does)."""
        now = self.pacing.clock()
        if self._last is None:
            start = now
        else:
            pause = self.pacing.delay(self.attempt)
            self.attempt += 1
            start = self._last + max(self.pacing.min_interval, pause)
        if self._not_before is not None:
            start = max(start, self._not_before)
        return start

    def wait(self, deadline: Optional[float] = None, stop: Optional[threading.Event] = None) -> bool:
        """Waits until the next request may start and counts it as started.
        False, without waiting, when that is after ``deadline`` (a time on the
        pacing's clock): no request fits in the time left; False too when
        ``stop`` is set meanwhile. The first request goes at once whatever
        the deadline (a timeout of 0 still asks once)."""
        first = self._last is None
        start = self.next_start()
        if deadline is not None and start > deadline and not (first and start <= self.pacing.clock()):
            return False
        if self.pacing.pause(start - self.pacing.clock(), stop):
            return False
        self._last = self.pacing.clock()
        self._not_before = None
        self.requests += 1
        return True


def reconnect_delay(
    retry_after: Optional[float], option: Optional[float], server_retry: Optional[float]
) -> float:
    """The event stream's first wait before reconnecting, in seconds."""
    for v in (retry_after, option, server_retry):
        if v is not None:
            return v
    return DEFAULT_RETRY


def reconnect_pause(
    retry_after: Optional[float],
    option: Optional[float],
    server_retry: Optional[float],
    failures: int,
    pacing: Pacing,
) -> float:
    """The event stream's wait before reconnecting after ``failures``
    connections in a row that delivered nothing (1: the first): the
    reconnect delay (:func:`reconnect_delay`), and from the second failure
    on at least the schedule's pause, so that a server that stays down is
    asked less and less often."""
    wait = reconnect_delay(retry_after, option, server_retry)
    if failures > 1:
        wait = max(wait, pacing.delay(failures - 2))
    return wait


def transient(status: int) -> bool:
    """Whether an error answer is worth asking again later (429, 5xx)."""
    return status == 429 or status >= 500


def unsupported(status: int) -> bool:
    """Whether an error answer says the server has no such route."""
    return status in (404, 405, 501)


def retried(
    pacing: Pacing,
    fn: Callable[[], T],
    tries: Optional[int] = RETRIES,
    *,
    until: Optional[Callable[[], bool]] = None,
) -> T:
    """fn's answer, asked again on ``pacing``'s schedule while the server
    answers 429 or 5xx (:func:`transient`) or cannot be reached (an
    ``OSError``); any other error is a verdict, raised at once. The last
    failure is raised after ``tries`` tries in all (None: no count), or once
    ``until()`` says the time for trying is over (a settlement past its
    lease). A ``Retry-After`` holds the next try back."""
    pacer = pacing.pacer()
    tried = 0
    while True:
        pacer.wait()
        try:
            return fn()
        except CountersignError as e:
            tried += 1
            if not transient(e.status) or _given_up(tried, tries, until):
                raise
            pacer.retry_after(e.retry_after)
        except OSError:
            tried += 1
            if _given_up(tried, tries, until):
                raise


def _given_up(tried: int, tries: Optional[int], until: Optional[Callable[[], bool]]) -> bool:
    return (tries is not None and tried >= tries) or (until is not None and until())
