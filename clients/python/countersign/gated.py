"""gated: a function that runs as a caller-executed action, at most once.

The action is configured ``execute: {by: caller}`` on the server. Calling the
wrapped function makes a Countersign call (thread, tool call id, action,
input); when the call is approved its answer is the claim of a lease, and the
function runs under it, with the operation id as its idempotency key; its
result is then settled under the lease, which is renewed while the function
runs. Repeating the same call (the same tool call id) never runs the function
again: it answers the recorded outcome, or, while another process holds the
lease, waits for it.

An action the server executes itself (a webhook action, a read) is refused:
the function never runs for it, and ServerExecuted says so, instead of
handing back the server's result as if the function had produced it.

Every request of a gated call follows the client's schedule
(countersign.polling): at most one a second, the pauses growing from 0.5 s
to 30 s while the call stays pending, Retry-After honoured.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, TypeVar, Union

from . import polling as _polling
from .client import Client
from .errors import CountersignError
from .lease import GateError, LeaseLost, NotApplied, _lease_seconds, _Renewer, claimed_by_caller
from .polling import Pacer, Pacing

__all__ = [
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


class Denied(GateError):
    """The policy, authorization or preflight said no; nothing was stored."""


class NotExecuted(GateError):
    """A human rejected it, nobody decided in time, or it was replaced or withdrawn."""


class Failed(GateError):
    """It ran and failed (the function raised NotApplied), or a check before it failed."""


class OutcomeUnknown(GateError):
    """Nobody knows whether it was applied (unknown, reconciling): do not retry automatically."""


class StillPending(GateError):
    """The wait ran out before a decision: call again (same tool call id) to go on waiting."""


class ConfirmationRequired(GateError):
    """A two-phase rule asks for the confirmation's evidence: call again with ``evidence``."""


class ServerExecuted(GateError):
    """The action is not caller-executed: the server runs it (a webhook
    action, an ``independent`` rule's worker, a read), so the gated function
    was not run, and never will be for it. ``answer`` is the call's answer:
    for a pending proposal the server executes it once approved; for a
    settled one it holds the server's outcome, which is not the function's.
    Gate only actions configured ``execute: {by: caller}``; follow others with
    Client.call and Client.wait_for_proposal."""


@dataclass
class Receipt:
    """What a gated function may return: the change's id in the backend, and a result."""

    id: str = ""
    result: Any = None


@dataclass
class Execution:
    """The claim a gated function runs under."""

    proposal_id: str
    #: The idempotency key of this proposal's execution: the same on every attempt.
    operation_id: str
    #: 1, then one more each time an idempotent action's lapsed lease is claimed again.
    attempt: int
    input: Any
    lease_token: str
    #: Set once a renewal was refused: the lease is someone else's now.
    lost: threading.Event = field(default_factory=threading.Event)


F = TypeVar("F", bound=Callable[..., Any])

ThreadID = Union[str, Callable[[], str]]

def gated(
    client: Client,
    action: str,
    *,
    thread_id: Optional[ThreadID] = None,
    wait_seconds: float = 25,
    timeout: Optional[float] = None,
    pacing: Optional[Pacing] = None,
) -> Callable[[Callable[..., Any]], "Gated"]:
    """Decorates ``fn`` to run as the caller-executed action ``action``.

    The wrapper is called ``wrapper(tool_call_id, /, **input)`` (the default
    thread) or ``wrapper.call(input, tool_call_id=..., thread_id=...)``; ``fn``
    receives the input's fields as keyword arguments, and ``execution`` too
    when it takes it. It returns what the settled call recorded: the
    function's result (as JSON gave it back), or, on a repeat, the recorded
    one. Other outcomes raise a GateError; an action the server executes
    raises ServerExecuted, and the function does not run.

    ``wait_seconds`` (0 to 60) is how long each call asks the server to hold
    it while the proposal is pending; ``timeout`` (None: no bound) bounds the
    whole wait for a decision, after which StillPending is raised. Requests
    follow ``pacing`` (default the client's; see countersign.polling): at most
    one a second for the call, the pauses growing from 0.5 s to 30 s while it
    stays pending or requests fail (429, 5xx, the network), Retry-After
    honoured."""
    if not isinstance(action, str) or not action:
        raise TypeError("gated: action must be a non-empty string")
    if not (0 <= wait_seconds <= _polling.MAX_WAIT_SECONDS):
        raise ValueError(f"gated {action}: wait_seconds must be from 0 to {_polling.MAX_WAIT_SECONDS}")
    if timeout is not None and not (timeout >= 0):
        raise ValueError(f"gated {action}: timeout must be None or a number >= 0")

    def wrap(fn: Callable[..., Any]) -> Gated:
        return Gated(client, action, fn, thread_id=thread_id, wait_seconds=wait_seconds, timeout=timeout, pacing=pacing)

    return wrap


class Gated:
    """A function gated by Countersign (see gated)."""

    def __init__(
        self,
        client: Client,
        action: str,
        fn: Callable[..., Any],
        *,
        thread_id: Optional[ThreadID] = None,
        wait_seconds: float = 25,
        timeout: Optional[float] = None,
        pacing: Optional[Pacing] = None,
    ) -> None:
        self.client, self.action, self.fn = client, action, fn
        self.thread_id = thread_id
        self.wait_seconds = min(wait_seconds, _polling.MAX_WAIT_SECONDS)
        self.timeout = timeout
        self.pacing = pacing if pacing is not None else client.pacing
        params = inspect.signature(fn).parameters
        self._takes_execution = "execution" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        functools.update_wrapper(self, fn)

    def __call__(self, tool_call_id: str, /, **input: Any) -> Any:
        return self.call(input, tool_call_id=tool_call_id)

    def call(
        self,
        input: Any,
        *,
        tool_call_id: str,
        thread_id: Optional[str] = None,
        run_id: Optional[str] = None,
        evidence: Optional[str] = None,
    ) -> Any:
        """Makes the call and, once it may run, runs the function under the lease."""
        thread = thread_id or (self.thread_id() if callable(self.thread_id) else self.thread_id)
        if not thread:
            raise TypeError(f"gated {self.action}: no thread_id")
        clock = self.pacing.clock
        deadline = None if self.timeout is None else clock() + self.timeout
        # One schedule for every request of this call: the repeated calls
        # while it is pending or executing elsewhere, and retries after
        # failures. It is what keeps a call the server answers at once (a
        # long-poll cut short, wait_seconds 0) from becoming a flood.
        pacer = self.pacing.pacer()
        last: Optional[Dict[str, Any]] = None
        unreachable = False
        while True:
            if not pacer.wait(deadline):
                raise _still_pending(self.action, last, unreachable)
            left = None if deadline is None else max(0.0, deadline - clock())
            wait = self.wait_seconds if left is None else min(self.wait_seconds, left)
            try:
                ans = self.client.call(
                    thread, tool_call_id, self.action, input, run_id=run_id, evidence=evidence, wait_seconds=wait
                )
            except CountersignError as e:
                if not _polling.transient(e.status):
                    raise
                pacer.retry_after(e.retry_after)
                unreachable = True
                continue
            except OSError:
                unreachable = True
                continue
            unreachable = False
            status = ans.get("status")
            if last is not None and last.get("status") != status:
                pacer.reset()  # progress: the pauses start again
            last = ans
            _refuse_independent(self.action, ans)
            if status == "execute":
                return self._run(ans)
            if status == "succeeded" or (status == "failed" and ans.get("executed") is True):
                # A settled outcome this call did not produce: a repeat of a
                # call this function ran (here or in another process), or an
                # execution by the server, which is not this function's.
                self._check_caller_executed(ans, pacer, deadline)
                if status == "succeeded":
                    return ans.get("result")
            if status in ("pending", "executing"):
                # pending: the server held the call up to wait_seconds and no
                # one decided; executing: another process (or this one's
                # earlier attempt) holds the lease: ask again until it
                # settles, or lapses and is released to the next identical call.
                continue
            raise _error(self.action, ans)

    def _check_caller_executed(self, ans: Dict[str, Any], pacer: Pacer, deadline: Optional[float]) -> None:
        """Raises ServerExecuted unless a caller ran ans's proposal: the audit
        trail of a caller-executed action shows a claim by ``caller:<requester>``
        (a worker's or the server's own claim is not one). A read action
        leaves no record (its answer has no proposal): the server ran it."""
        p = ans.get("proposal")
        if not isinstance(p, dict) or not p.get("id"):
            raise ServerExecuted(_server_executed_message(self.action, "the server ran it (a read action leaves no proposal)"), ans)
        first = True
        while True:
            # The first read follows the call's answer at once (a second
            # request, not a poll); a retry waits its turn on the schedule.
            if not first and not pacer.wait(deadline):
                raise StillPending(f"{self.action}: the proposal's audit trail could not be read in time", ans)
            first = False
            try:
                events: List[Dict[str, Any]] = self.client.proposal_events(p["id"])
            except CountersignError as e:
                if not _polling.transient(e.status):
                    raise
                pacer.retry_after(e.retry_after)
                continue
            except OSError:
                continue
            break
        if claimed_by_caller(events):
            return
        raise ServerExecuted(
            _server_executed_message(self.action, f"the server ran proposal {p['id']} ({ans.get('status')}); no caller ever claimed it"),
            ans,
        )

    def _run(self, ans: Dict[str, Any]) -> Any:
        lease = ans["lease"]
        ex = Execution(
            proposal_id=ans["proposal_id"], operation_id=ans["operation_id"], attempt=int(lease["attempt"]),
            input=ans.get("input"), lease_token=lease["token"],
        )
        renewer = _Renewer(self.client, ex, _lease_seconds(lease["expires_at"], (ans.get("proposal") or {}).get("updated_at")))
        renewer.start()
        try:
            kwargs = dict(ans.get("input") or {}) if isinstance(ans.get("input"), dict) else {}
            if self._takes_execution:
                kwargs["execution"] = ex
            try:
                out = self.fn(**kwargs)
            except NotApplied as e:
                return self._settle(ex, renewer, "failed", error=str(e) or "not applied")
            except BaseException:
                # Uncertain: nothing is settled, and the lease is left to lapse.
                renewer.stop()
                raise
            receipt = out if isinstance(out, Receipt) else Receipt(result=out)
            result = json.loads(json.dumps(receipt.result))
            return self._settle(ex, renewer, "succeeded", receipt=receipt.id or None, result=result)
        finally:
            renewer.stop()

    def _settle(self, ex: Execution, renewer: "_Renewer", outcome: str, **fields: Any) -> Any:
        # The work is done: record it while the lease may still be held,
        # retrying failures that are not verdicts on the schedule. The fence
        # decides.
        res = _polling.retried(
            self.pacing, lambda: self.client.settle(ex.proposal_id, ex.lease_token, outcome, **fields),
            tries=None, until=renewer.expired,
        )
        if res.get("status") != "applied":
            raise LeaseLost(f"{self.action}: the lease was lost; the outcome was not recorded", res)
        if outcome == "failed":
            raise Failed(f"{self.action}: {fields.get('error')}", res)
        return (res.get("proposal") or {}).get("outcome", {}).get("result")


def _server_executed_message(action: str, why: str) -> str:
    return (
        f"{action} is executed by the server, not by this process: {why}. "
        f"@gated runs its function only for actions configured execute: {{by: caller}}, "
        f"so the function was not run; follow a server-executed action with Client.call and Client.wait_for_proposal"
    )


def _refuse_independent(action: str, ans: Dict[str, Any]) -> None:
    """A caller-executed action's proposals are never independent (the
    server waits for its caller instead): an independent one is for the
    workers to execute once approved."""
    p = ans.get("proposal")
    if isinstance(p, dict) and p.get("mode") == "independent":
        raise ServerExecuted(
            _server_executed_message(
                action, f"its proposal {p.get('id')} is independent ({ans.get('status')}): a worker executes it once approved"
            ),
            ans,
        )


def _still_pending(action: str, last: Optional[Dict[str, Any]], unreachable: bool) -> StillPending:
    if unreachable or last is None:
        return StillPending(f"{action}: the server could not be reached in time", last or {"status": "pending"})
    if last.get("status") == "executing":
        return StillPending(f"{action}: still executing under another lease (proposal {last.get('proposal_id')})", last)
    return StillPending(f"{action}: no decision yet (proposal {last.get('proposal_id')})", last)


def _error(action: str, ans: Dict[str, Any]) -> GateError:
    status = ans.get("status")
    if status == "denied":
        return Denied(f"{action}: denied: {ans.get('reason')}", ans)
    if status == "failed":
        return Failed(f"{action}: failed: {ans.get('error')}", ans)
    if status in ("unknown", "reconciling"):
        return OutcomeUnknown(f"{action}: outcome {status}: {ans.get('error')}", ans)
    if status in ("rejected", "expired", "superseded", "cancelled"):
        return NotExecuted(f"{action}: {status}; it was not executed", ans)
    if status in ("confirmation_required", "confirmation_invalid"):
        return ConfirmationRequired(f"{action}: {status}", ans)
    return GateError(f"{action}: unexpected answer {status!r}", ans)
