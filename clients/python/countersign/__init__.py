"""Countersign's Python client: the HTTP API, and ``gated`` functions that
run as caller-executed actions. Standard library only; Python 3.10+."""

from .polling import MAX_BACKOFF, MAX_DELAY, MIN_DELAY, MIN_INTERVAL, Pacer, Pacing
from .client import NEXT_HEADER, SETTLED, Client, ProposalEvent, Response, WatchSnapshot
from .errors import CountersignError
from .gated import (
    ConfirmationRequired,
    Denied,
    Execution,
    Failed,
    GateError,
    Gated,
    LeaseLost,
    NotApplied,
    NotExecuted,
    OutcomeUnknown,
    Receipt,
    ServerExecuted,
    StillPending,
    gated,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "CountersignError",
    "ProposalEvent",
    "Response",
    "WatchSnapshot",
    "NEXT_HEADER",
    "SETTLED",
    "MAX_BACKOFF",
    "MAX_DELAY",
    "MIN_DELAY",
    "MIN_INTERVAL",
    "Pacing",
    "Pacer",
    "gated",
    "Gated",
    "Execution",
    "Receipt",
    "NotApplied",
    "GateError",
    "Denied",
    "NotExecuted",
    "Failed",
    "OutcomeUnknown",
    "StillPending",
    "ConfirmationRequired",
    "LeaseLost",
    "ServerExecuted",
]
