"""The polling rules the TypeScript client follows, in one place.

- A watcher polls every ``interval`` seconds (default 1) while something is
  unsettled. Each failing read (a 5xx or 429 answer, the network) doubles the
  wait, up to ``MAX_BACKOFF`` (30 s); a success returns it to ``interval``.
  The failure is reported once per run of failures. A 404, 405 or 501 says the
  server lacks the route: reported once, and nothing is read again.
- The event stream reconnects after ``Retry-After`` when the answer gave one,
  else the caller's delay, else the server's ``retry:`` field, else 2 s. An
  answer the server gives for good (401, 403, 400 ...) ends it.
- A long-poll asks for at most ``MAX_WAIT_SECONDS`` (60) at a time.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "MAX_BACKOFF",
    "MAX_WAIT_SECONDS",
    "DEFAULT_RETRY",
    "backoff",
    "reconnect_delay",
    "transient",
    "unsupported",
]

#: The longest wait between failing reads, in seconds.
MAX_BACKOFF = 30.0
#: The longest wait_seconds the server takes.
MAX_WAIT_SECONDS = 60
#: The event stream's reconnect delay when nobody says otherwise, in seconds.
DEFAULT_RETRY = 2.0


def backoff(interval: float, failures: int) -> float:
    """The wait after ``failures`` failing reads in a row (0: none):
    ``interval`` doubled for each, at most ``MAX_BACKOFF``."""
    if failures <= 0:
        return interval
    return min(MAX_BACKOFF, interval * 2**failures)


def reconnect_delay(
    retry_after: Optional[float], option: Optional[float], server_retry: Optional[float]
) -> float:
    """The event stream's wait before reconnecting, in seconds."""
    for v in (retry_after, option, server_retry):
        if v is not None:
            return v
    return DEFAULT_RETRY


def transient(status: int) -> bool:
    """Whether an error answer is worth asking again later (429, 5xx)."""
    return status == 429 or status >= 500


def unsupported(status: int) -> bool:
    """Whether an error answer says the server has no such route."""
    return status in (404, 405, 501)
