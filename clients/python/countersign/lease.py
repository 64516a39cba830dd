"""The execute lease of a caller-executed action, as a context manager.

A caller-executed action (``execute: {by: caller}``) is claimed by the call
whose answer is ``execute``: the proposal is ``executing`` under that lease
and no one else holds it. The caller runs the side effect with the
operation id as its idempotency key and settles the outcome under the
lease, renewing it while it runs (docs/api.md, Caller-executed actions)::

    claim = client.submit(thread, tool_call_id, "payments.refund", {"amount": 40})
    if claim.status == "execute":
        with client.lease(claim) as run:
            r = bank.refund(40, idempotency_key=run.operation_id)
            run.succeeded(result={"refund": r.id}, receipt=r.id)

On leaving the block:

- normally: the outcome is settled, ``succeeded`` (with what
  :meth:`Running.succeeded` recorded, if anything) or ``failed`` when the
  body called :meth:`Running.failed`;
- by :class:`NotApplied` (the change certainly did not happen): settled
  ``failed``, and the exception goes on;
- by any other exception, :class:`Uncertain` or not, or because the process
  died: nothing is settled. An exception part-way through a side effect
  does not say whether it happened, so recording ``failed`` would be a
  guess, and a guess that allows a second execution. The renewals stop and
  the lease lapses; the server then reconciles it (a ``reconcile`` URL),
  lets an idempotent action be claimed again (same operation id), or
  records it ``unknown`` for an operator to resolve.

A settlement the server refuses because the lease is no longer this
caller's (``conflict``: it lapsed, or a renewal was refused) raises
:class:`LeaseLost`: the side effect ran, and its outcome was not recorded.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Collection, Dict, Iterable, Mapping, Optional, Type, Union

from . import polling as _polling
from .errors import CountersignError
from .types import CallResult, Proposal

if TYPE_CHECKING:
    from .client import Client

__all__ = [
    "GateError",
    "LeaseLost",
    "NotApplied",
    "Uncertain",
    "Running",
    "LeaseContext",
    "CALLER_OWNER",
    "claimed_by_caller",
    "await_holder",
]

#: The lease owner the server records for a caller's claim,
#: ``caller:<requester>`` (docs/state-machine.md).
CALLER_OWNER = "caller:"


class GateError(Exception):
    """A caller-executed call that did not come to a result. ``answer`` is
    the call's (or the settlement's) body."""

    def __init__(self, message: str, answer: Dict[str, Any]) -> None:
        super().__init__(message)
        self.answer = answer
        self.status = answer.get("status")
        self.proposal = answer.get("proposal")


class LeaseLost(GateError):
    """The action ran, but its lease was lost before the outcome could be
    settled (the fence decided): the outcome is not recorded."""


class NotApplied(Exception):
    """Raise it when the change certainly did not happen: the outcome is
    settled ``failed``. Any other exception leaves the outcome uncertain:
    nothing is settled, and the lease is left to lapse, for the server to
    reconcile it, let an idempotent action be claimed again, or record it as
    unknown."""


class Uncertain(Exception):
    """Raise it to say that the change may or may not have happened (a
    time-out after the request was sent, a crash of the backend): nothing is
    settled, as for any exception but NotApplied; it names the case."""


class Running:
    """The claim a caller-executed action runs under (``with client.lease(...) as run``)."""

    def __init__(self, claim: CallResult) -> None:
        assert claim.lease is not None and claim.proposal_id is not None
        self.proposal_id: str = claim.proposal_id
        #: The idempotency key of this proposal's execution: the same on every attempt.
        self.operation_id: str = claim.operation_id or ""
        #: 1, then one more each time an idempotent action's lapsed lease is claimed again.
        self.attempt: int = claim.lease.attempt
        #: The input the proposal was approved with (the server's copy).
        self.input: Any = claim.input
        self.lease_token: str = claim.lease.token
        #: Set once a renewal was refused: the lease is someone else's now.
        self.lost = threading.Event()
        #: The settled proposal, once the block settled it (None: left uncertain).
        self.settled: Optional[Proposal] = None
        self._outcome = "succeeded"
        self._fields: Dict[str, Any] = {}

    def succeeded(self, result: Any = None, receipt: Optional[str] = None) -> None:
        """What to settle when the block ends: ``succeeded``, with the
        result (JSON) and the backend's receipt."""
        self._outcome = "succeeded"
        self._fields = {"result": _json(result), "receipt": receipt or None}

    def failed(self, error: str) -> None:
        """What to settle when the block ends: ``failed`` (the change
        certainly did not happen), with why."""
        self._outcome = "failed"
        self._fields = {"error": error or "not applied"}


def _json(v: Any) -> Any:
    """v as JSON gives it back (what the server records)."""
    return json.loads(json.dumps(v)) if v is not None else None


class LeaseContext:
    """``with client.lease(claim) as run``: see the module's documentation."""

    def __init__(self, client: "Client", claim: Union[CallResult, Mapping[str, Any]]) -> None:
        if not isinstance(claim, CallResult):
            claim = CallResult.from_json(dict(claim))
        if claim.status != "execute" or claim.lease is None or not claim.proposal_id:
            raise ValueError(f"lease: the call's answer is {claim.status!r}, not an execute claim")
        self.client = client
        self.claim = claim
        self.run = Running(claim)
        updated = claim.proposal.updated_at if claim.proposal is not None else None
        self._renewer = _Renewer(client, self.run, _lease_seconds(claim.lease.expires_at, updated))

    def __enter__(self) -> Running:
        self._renewer.start()
        return self.run

    def __exit__(
        self, kind: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> bool:
        try:
            if exc is None:
                self._settle(self.run._outcome, **self.run._fields)
            elif isinstance(exc, NotApplied):
                self._settle("failed", error=str(exc) or "not applied")
            # Anything else: uncertain. Nothing is settled; the lease lapses.
        finally:
            self._renewer.stop()
        return False

    def _settle(self, outcome: str, **fields: Any) -> None:
        # The work is done: record it while the lease may still be held,
        # retrying failures that are not verdicts on the schedule; the fence
        # decides. Past the lease's end a retry is pointless (the server
        # answers conflict), and the error goes to the caller.
        run = self.run
        body = {k: v for k, v in fields.items() if v is not None}
        res = _polling.retried(
            self.client.pacing, lambda: self.client.settle(run.proposal_id, run.lease_token, outcome, **body),
            tries=None, until=self._renewer.expired,
        )
        if res.get("status") != "applied":
            raise LeaseLost(f"proposal {run.proposal_id}: the lease was lost; the outcome was not recorded", res)
        run.settled = Proposal.from_json(res.get("proposal"))


def _parse_time(s: str) -> datetime:
    # fromisoformat takes "Z" only from Python 3.11.
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    head, sep, tail = s.partition(".")
    if sep:
        # At most microseconds.
        n = 0
        while n < len(tail) and tail[n].isdigit():
            n += 1
        digits, zone = tail[:n], tail[n:]
        s = head + "." + digits[:6] + zone
    return datetime.fromisoformat(s)


def _lease_seconds(expires_at: str, claimed_at: Optional[str] = None) -> float:
    """How long the lease lasts (at least a second): from the claim's own
    stamp (the proposal's updated_at, the server's clock) to expires_at, so
    that this machine's clock, which may be off, does not count; without the
    stamp, from the local now."""
    start = datetime.now(timezone.utc)
    if claimed_at:
        try:
            start = _parse_time(claimed_at)
        except ValueError:
            pass
    try:
        end = _parse_time(expires_at)
    except ValueError:
        return 1.0
    return max(1.0, (end - start).total_seconds())


class _Renewer:
    """Renews a lease every third of its length while the action runs; a
    refused renewal marks the execution lost."""

    def __init__(self, client: "Client", run: Any, lease: float) -> None:
        self.client, self.run = client, run
        self.lease = lease
        self.until = time.monotonic() + lease
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"countersign-renew-{run.proposal_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def expired(self) -> bool:
        return time.monotonic() >= self.until

    def _loop(self) -> None:
        every = self.lease / 3
        while not self._stop.wait(every):
            asked = time.monotonic()
            try:
                res = self.client.renew(self.run.proposal_id, self.run.lease_token)
            except (CountersignError, OSError):
                every = self.lease / 10  # not a verdict: try again soon
                continue
            if res.get("status") != "applied":
                self.run.lost.set()
                return
            self.until = asked + self.lease
            every = self.lease / 3


def claimed_by_caller(events: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a proposal's audit trail (``client.proposal_events(id)``)
    shows a claim by a caller, ``caller:<requester>``: a caller ran it. A
    worker's or the server's own claim is not one."""
    return any(e.get("type") == "proposal.claimed" and str(e.get("actor") or "").startswith(CALLER_OWNER) for e in events)


def await_holder(
    client: "Client",
    p: Proposal,
    timeout: float,
    *,
    statuses: Collection[str] = ("executing",),
    done: Optional[Callable[[Proposal], bool]] = None,
) -> Proposal:
    """Waits while ``p`` is in one of ``statuses`` (another holder's lease
    runs: a concurrent resume, or this process's earlier attempt), at most
    ``timeout`` seconds on the client's clock, in long-polls of at most
    25 s, each retried on the client's schedule (:func:`countersign.polling.retried`). ``done`` ends
    the wait early on a proposal it accepts. Returns the proposal as last read."""
    clock = client.pacing.clock
    deadline = clock() + timeout
    while p.status in statuses:
        left = deadline - clock()
        if left <= 0:
            return p
        pid, poll = p.id, min(left, 25.0)
        p = _polling.retried(client.pacing, lambda: client.wait(pid, timeout_seconds=poll))
        if done is not None and done(p):
            return p
    return p
