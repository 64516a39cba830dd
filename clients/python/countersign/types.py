"""Typed results: what the API answers, as dataclasses.

Each type reads the JSON the server sent (``from_json``) and keeps it whole
in ``raw``, so that a field this version of the client does not name yet is
still there. Reading never raises for a missing optional field: it is None
(or empty); a field of the wrong JSON type raises InvalidResponse, naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from .errors import make_error

__all__ = [
    "Me",
    "Lease",
    "Decision",
    "Outcome",
    "Proposal",
    "CallResult",
    "TERMINAL",
    "UNCERTAIN",
    "NOT_EXECUTED",
]

#: Statuses from which a proposal never moves again.
TERMINAL = frozenset(["succeeded", "failed", "unknown", "rejected", "expired", "superseded", "cancelled"])
#: Statuses whose outcome nobody knows (an operator resolves them).
UNCERTAIN = frozenset(["unknown", "reconciling"])
#: Statuses in which the action never ran and never will.
NOT_EXECUTED = frozenset(["rejected", "expired", "superseded", "cancelled"])


def _get(doc: Mapping[str, Any], key: str, kind: Any, what: str) -> Any:
    v = doc.get(key)
    if v is None:
        return None
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise make_error(200, "INVALID_RESPONSE", f"{what}: {key} is not a {getattr(kind, '__name__', kind)}")
    return v


def _obj(doc: Any, what: str) -> Dict[str, Any]:
    if not isinstance(doc, dict):
        raise make_error(200, "INVALID_RESPONSE", f"{what} is not a JSON object")
    return doc


@dataclass(frozen=True)
class Me:
    """GET /v1/me: who a credential is."""

    tenant: str
    actor: str
    #: "human" or "agent" (docs/api.md Part 3, Credentials).
    kind: str
    roles: List[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    @classmethod
    def from_json(cls, doc: Any) -> "Me":
        d = _obj(doc, "GET /v1/me")
        return cls(
            tenant=_get(d, "tenant", str, "me") or "",
            actor=_get(d, "actor", str, "me") or "",
            kind=_get(d, "kind", str, "me") or "",
            roles=list(_get(d, "roles", list, "me") or []),
            raw=d,
        )


@dataclass(frozen=True)
class Lease:
    """The claim of a caller-executed action: run it now, under this token."""

    token: str
    #: When the lease lapses unless renewed (RFC 3339, the server's clock).
    expires_at: str
    #: 1, then one more each time an idempotent action's lapsed lease is claimed again.
    attempt: int

    @classmethod
    def from_json(cls, doc: Any) -> "Lease":
        d = _obj(doc, "lease")
        token = _get(d, "token", str, "lease")
        if not token:
            raise make_error(200, "INVALID_RESPONSE", "lease: no token")
        return cls(token=token, expires_at=_get(d, "expires_at", str, "lease") or "", attempt=_get(d, "attempt", int, "lease") or 1)


@dataclass(frozen=True)
class Decision:
    """One decision recorded on a proposal."""

    actor: str
    #: "approved" or "rejected".
    decision: str
    via: str = ""
    at: str = ""
    reason: str = ""
    remember: str = ""
    actor_kind: str = ""

    @classmethod
    def from_json(cls, doc: Any) -> "Decision":
        d = _obj(doc, "decision")
        return cls(**{k: (_get(d, k, str, "decision") or "") for k in ("actor", "decision", "via", "at", "reason", "remember", "actor_kind")})


@dataclass(frozen=True)
class Outcome:
    """A settled proposal's outcome."""

    proposal_id: str
    status: str
    receipt: Optional[str]
    result: Any
    error: Optional[str]
    summary: str
    #: Why it ended so, when the server says (``not_collected``).
    reason: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Any) -> "Outcome":
        d = _obj(doc, "outcome")
        err = d.get("error")
        return cls(
            proposal_id=_get(d, "proposal_id", str, "outcome") or "",
            status=_get(d, "status", str, "outcome") or "",
            receipt=_get(d, "receipt", str, "outcome"),
            result=d.get("result"),
            error=err if isinstance(err, str) or err is None else str(err),
            summary=_get(d, "summary", str, "outcome") or "",
            reason=_get(d, "reason", str, "outcome"),
            raw=d,
        )


@dataclass(frozen=True)
class Proposal:
    """A proposal (docs/api.md, The proposal object)."""

    id: str
    status: str
    action: str
    thread_id: str
    tool_call_id: str
    requester: str
    requester_kind: str
    input: Any
    input_digest: str
    preview: str
    mode: str
    approvers: List[str]
    quorum: int
    decisions: List[Decision]
    expires_at: str
    operation_id: str
    outcome: Optional[Outcome]
    run_id: str
    created_at: str
    updated_at: str
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        """It never moves again."""
        return self.status in TERMINAL

    @property
    def uncertain(self) -> bool:
        """Nobody knows whether it was applied: never run it again on a guess."""
        return self.status in UNCERTAIN

    @property
    def not_executed(self) -> bool:
        """It never ran and never will: rejected, expired, superseded or cancelled."""
        return self.status in NOT_EXECUTED

    def why(self) -> str:
        """In words, how it stands: who decided, why, what came of it."""
        s = self.status
        rejected = [d for d in self.decisions if d.decision == "rejected"]
        if s == "rejected" and rejected:
            d = rejected[-1]
            return f"rejected by {d.actor}" + (f" ({d.reason})" if d.reason else "")
        if s == "expired" and self.outcome is not None and self.outcome.reason == "not_collected":
            return "approved, but not collected before it expired"
        if s == "expired":
            return f"nobody decided before {self.expires_at}"
        if s == "cancelled":
            return "cancelled by its requester"
        if s == "superseded":
            return "replaced by a newer proposal"
        if s in UNCERTAIN:
            err = self.outcome.error if self.outcome is not None else None
            return f"its outcome is {s}" + (f": {err}" if err else "") + "; an operator resolves it"
        if s == "failed" and self.outcome is not None:
            return "failed" + (f": {self.outcome.error}" if self.outcome.error else "")
        return s

    @classmethod
    def from_json(cls, doc: Any) -> "Proposal":
        d = _obj(doc, "proposal")
        pid = _get(d, "id", str, "proposal")
        if not pid:
            raise make_error(200, "INVALID_RESPONSE", "proposal: no id")
        what = f"proposal {pid}"
        out = d.get("outcome")
        return cls(
            id=pid,
            status=_get(d, "status", str, what) or "",
            action=_get(d, "action", str, what) or "",
            thread_id=_get(d, "thread_id", str, what) or "",
            tool_call_id=_get(d, "tool_call_id", str, what) or "",
            requester=_get(d, "requester", str, what) or "",
            requester_kind=_get(d, "requester_kind", str, what) or "",
            input=d.get("input"),
            input_digest=_get(d, "input_digest", str, what) or "",
            preview=_get(d, "preview", str, what) or "",
            mode=_get(d, "mode", str, what) or "",
            approvers=list(_get(d, "approvers", list, what) or []),
            quorum=_get(d, "quorum", int, what) or 0,
            decisions=[Decision.from_json(x) for x in (_get(d, "decisions", list, what) or [])],
            expires_at=_get(d, "expires_at", str, what) or "",
            operation_id=_get(d, "operation_id", str, what) or "",
            outcome=Outcome.from_json(out) if out is not None else None,
            run_id=_get(d, "run_id", str, what) or "",
            created_at=_get(d, "created_at", str, what) or "",
            updated_at=_get(d, "updated_at", str, what) or "",
            raw=d,
        )


@dataclass(frozen=True)
class CallResult:
    """The answer of POST /v1/calls, by ``status`` (docs/api.md, Calls):

    - ``execute``: the claim; ``lease`` is set, run the action now under it
      (:meth:`countersign.Client.lease`);
    - ``executing``: someone else holds the lease;
    - ``pending``: nobody decided yet;
    - ``succeeded`` / ``failed``: it ran (``result``, ``receipt``, ``error``);
    - ``rejected`` / ``expired`` / ``superseded`` / ``cancelled``: it never ran;
    - ``unknown`` / ``reconciling``: nobody knows whether it was applied;
    - ``denied``: the policy or authorization said no (``code``, ``reason``),
      nothing stored;
    - ``confirmation_required`` / ``confirmation_invalid``: two-phase.
    """

    status: str
    proposal_id: Optional[str]
    proposal: Optional[Proposal]
    operation_id: Optional[str]
    input: Any
    lease: Optional[Lease]
    #: True when it ran, False when it did not, None when nobody knows.
    executed: Optional[bool]
    result: Any
    receipt: Optional[str]
    error: Optional[str]
    code: Optional[str]
    reason: Optional[str]
    confirmation_id: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Any) -> "CallResult":
        d = _obj(doc, "POST /v1/calls")
        status = _get(d, "status", str, "call")
        if not status:
            raise make_error(200, "INVALID_RESPONSE", "call: no status")
        p = d.get("proposal")
        proposal = Proposal.from_json(p) if p is not None else None
        lease = Lease.from_json(d["lease"]) if d.get("lease") is not None else None
        if status == "execute" and lease is None:
            raise make_error(200, "INVALID_RESPONSE", "call: an execute answer without a lease")
        err = d.get("error")
        pid = _get(d, "proposal_id", str, "call") or (proposal.id if proposal else None)
        return cls(
            status=status,
            proposal_id=pid,
            proposal=proposal,
            operation_id=_get(d, "operation_id", str, "call") or (proposal.operation_id if proposal else None) or None,
            input=d.get("input", proposal.input if proposal else None),
            lease=lease,
            executed=d.get("executed") if isinstance(d.get("executed"), bool) else None,
            result=d.get("result"),
            receipt=_get(d, "receipt", str, "call"),
            error=err if isinstance(err, str) or err is None else str(err),
            code=_get(d, "code", str, "call"),
            reason=_get(d, "reason", str, "call"),
            confirmation_id=_get(d, "confirmation_id", str, "call"),
            raw=d,
        )
