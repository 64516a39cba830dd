"""Countersign's Python client: the HTTP API, and ``gated`` functions that
run as caller-executed actions. Standard library only; Python 3.10+.

It is the base every framework adapter builds on (countersign-langgraph,
...): typed results (:mod:`countersign.types`), one schedule for every poll
and retry (:mod:`countersign.polling`), the execute lease as a context
manager (:mod:`countersign.lease`) and one exception class per family of the
API's error codes (:mod:`countersign.errors`)."""

from .polling import MAX_BACKOFF, MAX_DELAY, MIN_DELAY, MIN_INTERVAL, Pacer, Pacing
from .client import NEXT_HEADER, SETTLED, Client, ProposalEvent, Response, WatchSnapshot
from .errors import (
    AgentCannotDecide,
    Conflict,
    CountersignError,
    Forbidden,
    Invalid,
    InvalidResponse,
    NotAnAgent,
    NotFound,
    RateLimited,
    ServerFault,
    Unauthenticated,
    Unavailable,
)
from .lease import LeaseContext, Running, Uncertain
from .types import CallResult, Decision, Lease, Me, Outcome, Proposal
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

__version__ = "0.2.1"

__all__ = [
    "Client",
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
    "Me",
    "Lease",
    "Decision",
    "Outcome",
    "Proposal",
    "CallResult",
    "LeaseContext",
    "Running",
    "Uncertain",
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
