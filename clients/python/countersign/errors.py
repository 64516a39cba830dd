"""CountersignError: what an error answer of the API says."""

from __future__ import annotations

import json
import re
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
    def from_response(cls, status: int, headers: Mapping[str, str], body: bytes) -> "CountersignError":
        """Reads an error answer; it never raises."""
        retry_after = parse_retry_after(headers.get("Retry-After"))
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


def parse_retry_after(value: Optional[str]) -> Optional[int]:
    """Reads Retry-After's delay-seconds form; anything else is None."""
    if value is None or not _SECONDS.match(value):
        return None
    return int(value.strip())
