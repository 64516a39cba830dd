"""CountersignError: what an error answer of the API says."""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from typing import Any, Mapping, Optional

__all__ = [
    "CountersignError",
    "Unauthenticated",
    "Forbidden",
    "AgentCannotDecide",
    "NotAnAgent",
    "NotFound",
    "Invalid",
    "Conflict",
    "RateLimited",
    "Unavailable",
    "ServerFault",
    "InvalidResponse",
    "error_class",
    "make_error",
    "parse_retry_after",
]


class CountersignError(Exception):
    """An error answer of the API: its HTTP status and the body's
    ``{"error": {"code", "message", "details"}}``.

    An answer that is not the API's error shape (a proxy's HTML page) still
    becomes one, with code ``INVALID_RESPONSE`` and the status it came with.

    Every error the client raises for an answer is an instance of one
    subclass per family of the API's codes, so that a caller catches the kind
    it can act on (``except Conflict``) and reads ``code`` for the detail:
    :class:`Unauthenticated` (401), :class:`Forbidden` (403; an agent asking
    to decide is :class:`AgentCannotDecide`), :class:`NotFound` (404),
    :class:`Invalid` (400, 405, 413, 415: the request must change),
    :class:`Conflict` (409), :class:`RateLimited` (429), :class:`Unavailable`
    (503 and the other 5xx a proxy gives), :class:`ServerFault` (500) and
    :class:`InvalidResponse` (an answer that is not the API's).
    ``transient`` says whether asking again later may help.
    """

    #: Whether the same request may succeed later (429, 5xx): the client's
    #: waiting methods retry these on their schedule; the others are verdicts.
    transient = False

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        retry_after: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        #: The HTTP status (400, 404, 409, 503, ...).
        self.status = status
        #: The API's error code: INVALID_INPUT, NOT_FOUND, INVALID_STATE, ...
        self.code = code
        self.message = message
        #: The body's details: the problems of a bad body or input, ...
        self.details = details
        #: Seconds the server asked to wait (Retry-After), when it said.
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"CountersignError({self.status}, {self.code!r}, {self.message!r})"

    @classmethod
    def from_response(
        cls, status: int, headers: Mapping[str, str], body: bytes, now: Optional[float] = None
    ) -> "CountersignError":
        """Reads an error answer; it never raises. ``now`` is the time of day
        a Retry-After date is counted from (default the real one)."""
        retry_after = parse_retry_after(_header(headers, "Retry-After"), now)
        text = body.decode("utf-8", "replace")
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict) and isinstance(err.get("code"), str) and isinstance(err.get("message"), str):
            return make_error(status, err["code"], err["message"], err.get("details"), retry_after)
        snippet = text[:200] + ("…" if len(text) > 200 else "")
        return make_error(status, "INVALID_RESPONSE", f"HTTP {status}" + (f": {snippet}" if snippet else ""), None, retry_after)


class Unauthenticated(CountersignError):
    """401 UNAUTHENTICATED: no token, or one the server does not accept."""


class Forbidden(CountersignError):
    """403: the caller may not see or do this (another tenant's proposal, a
    thread it does not own, a decision it may not make, STEP_UP_REQUIRED)."""


class AgentCannotDecide(Forbidden):
    """403 AGENT_CANNOT_DECIDE: an agent credential asked for something shaped
    like a decision (approve, reject, a user message, ...)."""


class NotAnAgent(Forbidden):
    """Raised by the client itself, before any call: the credential is not
    ``kind: agent`` (GET /v1/me), and what asked for it (an adapter) acts
    only as an agent. ``status`` is 403 and ``code`` NOT_AN_AGENT; ``details``
    is the credential's /v1/me."""


class NotFound(CountersignError):
    """404: an unknown proposal, thread, run, grant or action (ACTION_NOT_FOUND)."""


class Invalid(CountersignError):
    """The request itself is wrong and must change before it can succeed:
    400 (INVALID_BODY, INVALID_INPUT with ``details`` per path,
    INVALID_CURSOR, INVALID_REMEMBER), 405, 413 and 415."""


class Conflict(CountersignError):
    """409: the request does not fit the state it met (INVALID_STATE,
    THREAD_BUSY, CALL_MISMATCH, MESSAGE_ID_TAKEN)."""


class RateLimited(CountersignError):
    """429 TOO_MANY_REQUESTS: ask again after ``retry_after`` seconds."""

    transient = True


class Unavailable(CountersignError):
    """503 UNAVAILABLE (the store cannot be reached; ``retry_after`` says when
    to ask again), or another 5xx that a proxy in front of the server gave."""

    transient = True


class ServerFault(CountersignError):
    """500 INTERNAL: a fault of the server, never caused by the request."""

    transient = True


class InvalidResponse(CountersignError):
    """An answer that is not the API's: not JSON, not the shape the route
    promises (code INVALID_RESPONSE, with the HTTP status it came with)."""

    @property
    def transient(self) -> bool:  # type: ignore[override]
        # A proxy's 502 page is as transient as a 502; a 200 that is not
        # JSON is not.
        return self.status == 429 or self.status >= 500


#: The family of each error code of the API (docs/api.md, Error codes).
_BY_CODE = {
    "UNAUTHENTICATED": Unauthenticated,
    "FORBIDDEN": Forbidden,
    "STEP_UP_REQUIRED": Forbidden,
    "AGENT_CANNOT_DECIDE": AgentCannotDecide,
    "NOT_FOUND": NotFound,
    "ACTION_NOT_FOUND": NotFound,
    "METHOD_NOT_ALLOWED": Invalid,
    "INVALID_BODY": Invalid,
    "INVALID_INPUT": Invalid,
    "INVALID_CURSOR": Invalid,
    "INVALID_REMEMBER": Invalid,
    "BODY_TOO_LARGE": Invalid,
    "UNSUPPORTED_MEDIA_TYPE": Invalid,
    "INVALID_STATE": Conflict,
    "THREAD_BUSY": Conflict,
    "CALL_MISMATCH": Conflict,
    "MESSAGE_ID_TAKEN": Conflict,
    "TOO_MANY_REQUESTS": RateLimited,
    "UNAVAILABLE": Unavailable,
    "NOT_READY": Unavailable,
    "INTERNAL": ServerFault,
    "INVALID_RESPONSE": InvalidResponse,
}


def error_class(status: int, code: str) -> type:
    """The class an error answer becomes: by its code, else (a code this
    client does not know yet) by its HTTP status."""
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls
    if status == 401:
        return Unauthenticated
    if status == 403:
        return Forbidden
    if status == 404:
        return NotFound
    if status == 409:
        return Conflict
    if status == 429:
        return RateLimited
    if status == 500:
        return ServerFault
    if status > 500:
        return Unavailable
    if 400 <= status < 500:
        return Invalid
    return CountersignError


def make_error(
    status: int, code: str, message: str, details: Any = None, retry_after: Optional[int] = None
) -> CountersignError:
    """The error of an answer, as an instance of its family's class."""
    cls = error_class(status, code)
    err: CountersignError = cls(status, code, message, details, retry_after)
    return err


_SECONDS = re.compile(r"^\s*\d+\s*$")


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[int]:
    """Reads Retry-After: delay-seconds, or an HTTP date (RFC 9110), which
    becomes the seconds from ``now`` (the time of day, default the real one)
    to it, rounded up, 0 for a date past. Anything else is None."""
    if value is None:
        return None
    if _SECONDS.match(value):
        return int(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None  # an HTTP date is always GMT; one without a zone is not one
    left = when.timestamp() - (time.time() if now is None else now)
    return max(0, math.ceil(left))


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return None
