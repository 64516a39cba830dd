"""CountersignError: what an error answer of the API says."""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from typing import Any, Mapping, Optional

__all__ = ["CountersignError", "parse_retry_after"]


class CountersignError(Exception):
    """An error answer of the API: its HTTP status and the body's
    ``{"error": {"code", "message", "details"}}``.

    An answer that is not the API's error shape (a proxy's HTML page) still
    becomes one, with code ``INVALID_RESPONSE`` and the status it came with.
    """

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
            return cls(status, err["code"], err["message"], err.get("details"), retry_after)
        snippet = text[:200] + ("…" if len(text) > 200 else "")
        return cls(status, "INVALID_RESPONSE", f"HTTP {status}" + (f": {snippet}" if snippet else ""), None, retry_after)


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
