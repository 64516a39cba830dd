"""toolgate: what the framework adapters' gates share.

countersign-langgraph, -openai-agents, -pydantic-ai and -google-adk each
make a framework's tool call a Countersign call (docs/api.md Part 3, "Python
packages"): the framework's own pause while a human decides, a fresh read of
the proposal on resume, and only an approved proposal claimed and run, once,
under the lease. How a framework pauses, and the shape in which its model
gets an answer, is each adapter's own. What a call's answer means, which
requests follow from it, and the words in which the model hears of a call
that did not run here now are the same for all of them, and live here.

:class:`ToolGate` is the base of each adapter's ``Gate``. It checks the
gate's options, makes the requests (each retried on the client's schedule
while the server answers 429 or 5xx or cannot be reached), and reads a
call's answer with :meth:`ToolGate.classify` into one of three things:

- :class:`Claim`: the call was approved or allowed and this process holds
  the ``execute`` lease; the adapter runs the tool under it (``with
  client.lease(claim)``), once;
- :class:`Pending`: a proposal waits for a decision (or an idempotent
  action's lapsed lease waits to be claimed again); the adapter pauses its
  framework, or asks again;
- :class:`Verdict`: anything else. The tool does not run here; the verdict
  says what the model is told: a recorded result, or why it did not run.

An adapter shapes a Verdict as its framework wants it: a ToolMessage, a
function response, a string, a ToolFailed.

The requests block: an asynchronous adapter calls them through
``asyncio.to_thread``.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Protocol, Union

from . import polling as _polling
from .client import Client
from .errors import Conflict
from .lease import Running, await_holder, claimed_by_caller
from .types import CallResult, Proposal

__all__ = [
    "EXECUTION",
    "current_execution",
    "ToolCall",
    "CallRef",
    "Claim",
    "Pending",
    "Verdict",
    "ToolGate",
    "content",
    "still_executing",
    "not_applied",
    "lease_lost",
    "uncertain",
    "summary",
]

#: The claim a gated tool runs under: set by the gate around the tool's run
#: (``token = EXECUTION.set(run)``, then ``EXECUTION.reset(token)``).
EXECUTION: contextvars.ContextVar[Optional[Running]] = contextvars.ContextVar("countersign_execution", default=None)


def current_execution() -> Optional[Running]:
    """Inside a gated tool, the claim it runs under (``operation_id``: the
    idempotency key for the backend; ``proposal_id``; ``attempt``;
    ``lost``); None elsewhere. Every adapter exports it."""
    return EXECUTION.get()


class CallRef(Protocol):
    """One tool call, as Countersign names it: what a gate reads of each
    adapter's own ToolCallRef."""

    @property
    def thread_id(self) -> str:
        """The Countersign thread."""
        ...

    @property
    def tool_call_id(self) -> str:
        """The framework's (or the model's) tool call id."""
        ...

    @property
    def name(self) -> str:
        """The tool's name: what the model called, and what the words name."""
        ...

    @property
    def action(self) -> str:
        """The Countersign action."""
        ...

    @property
    def args(self) -> Any:
        """The arguments, as JSON: what is proposed."""
        ...


@dataclass(frozen=True)
class ToolCall:
    """One tool call, as Countersign names it (a CallRef)."""

    #: The Countersign thread.
    thread_id: str
    #: The framework's (or the model's) tool call id.
    tool_call_id: str
    #: The tool's name (what the model called).
    name: str
    #: The Countersign action.
    action: str
    #: The arguments, as JSON: what is proposed.
    args: Any


@dataclass(frozen=True)
class Claim:
    """The call's answer is the claim of its ``execute`` lease: run the tool
    once under it (``client.lease(answer)``)."""

    answer: CallResult


@dataclass(frozen=True)
class Pending:
    """The proposal is pending (waiting for its approvers), or approved and
    to be claimed again (an idempotent action's lapsed lease)."""

    proposal: Proposal


@dataclass(frozen=True)
class Verdict:
    """What the model is told of a call that does not run here now.

    ``text`` is what the model reads. For a success (``error`` False) it is
    the recorded result as text, ``result`` the result as recorded (the
    value the tool returned when it ran), and ``recorded`` whether a result
    was recorded at all (a reconciled outcome has a receipt, not a result).
    For anything else ``error`` is True and ``text`` says why."""

    text: str
    error: bool
    #: The proposal the verdict is about (None: the call left none, or it
    #: could not be read).
    proposal: Optional[Proposal] = None
    result: Any = None
    recorded: bool = False


#: What classify() makes of a call's answer.
Step = Union[Claim, Pending, Verdict]


def content(result: Any) -> str:
    """A recorded result as a tool's text output: a string as it is,
    nothing as the empty string, anything else as JSON."""
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    return json.dumps(result)


def still_executing(name: str) -> str:
    """Another holder's lease still runs: nobody knows the outcome yet."""
    return f"{name}: still executing under another holder's lease; its outcome is not known yet"


def not_applied(name: str, e: BaseException) -> str:
    """The tool raised NotApplied: settled failed, certainly not applied."""
    return f"{name} failed: not applied: {e}"


def lease_lost(name: str) -> str:
    """The tool ran, and the settlement was refused: the lease was lost."""
    return f"{name} ran, but its lease was lost before the outcome was recorded; Countersign reconciles it"


def uncertain(name: str, e: BaseException) -> str:
    """The tool raised anything but NotApplied: nothing was settled, and
    the lease lapses; the server reconciles it or records it unknown."""
    return (
        f"{name}: the outcome is uncertain ({type(e).__name__}: {e}); nothing was recorded, and "
        "Countersign reconciles it. Do not call it again: it may have been applied"
    )


def summary(p: Proposal) -> Dict[str, Any]:
    """What a framework's pause shows of a pending proposal (under the key
    ``countersign`` of its interrupt, deferral or confirmation): the
    proposal's id, action, thread, status, preview, approvers, expiry and
    input digest, and the whole proposal as the server gave it."""
    return {
        "proposal_id": p.id,
        "action": p.action,
        "thread_id": p.thread_id,
        "status": p.status,
        "preview": p.preview,
        "approvers": p.approvers,
        "expires_at": p.expires_at,
        "input_digest": p.input_digest,
        "proposal": p.raw,
    }


class ToolGate:
    """The base of an adapter's Gate; see the module's comment.

    ``local``: the tool runs in this process (a caller-executed action);
    False: the server executes the action (a webhook action), and the gate
    only reports its outcome. ``wait_seconds``: how long the first call
    waits for a decision on the server before the framework pauses.
    ``executing_timeout``: how long a resume waits while another holder's
    lease runs."""

    #: The adapter's package, naming it in its errors ("countersign_langgraph").
    package = "countersign"
    #: How to gate a caller-executed tool with this adapter: the end of the
    #: words for a claim that has no tool here to run.
    gate_hint = "wrap the tool with gated()"
    #: How to offer a server-executed action with this adapter: the end of
    #: the words for an action gated as a local tool.
    action_hint = "use action_tool() for a server-executed action"

    def __init__(self, client: Client, *, wait_seconds: float = 0, executing_timeout: float = 120, local: bool = True) -> None:
        if not isinstance(client, Client):
            raise TypeError(f"{self.package}: client must be a countersign.Client")
        if not (0 <= wait_seconds <= _polling.MAX_WAIT_SECONDS):
            raise ValueError(f"{self.package}: wait_seconds must be from 0 to {_polling.MAX_WAIT_SECONDS}")
        if not (executing_timeout >= 0):
            raise ValueError(f"{self.package}: executing_timeout must be >= 0")
        self.client = client
        self.wait_seconds = wait_seconds
        self.executing_timeout = executing_timeout
        self.local = local

    # -- requests -------------------------------------------------------------

    def retry(self, fn: Callable[[], Any]) -> Any:
        """fn, asked again on the client's schedule while the server answers
        429 or 5xx or cannot be reached; other errors are verdicts."""
        return _polling.retried(self.client.pacing, fn)

    def submit(self, call: CallRef, wait: float) -> CallResult:
        """The Countersign call (``POST /v1/calls``): a first call, or, of an
        approved proposal, the claim of its lease."""
        return self.retry(lambda: self.client.submit(call.thread_id, call.tool_call_id, call.action, call.args, wait_seconds=wait))

    def find(self, call: CallRef) -> Optional[Proposal]:
        """The call's proposal, found by thread and tool call id; None when
        it was never called."""
        return self.retry(lambda: self.client.find_call(call.thread_id, call.tool_call_id))

    def read(self, proposal_id: str) -> Proposal:
        """The proposal as it is now."""
        return self.retry(lambda: self.client.proposal(proposal_id))

    def withdraw(self, p: Proposal, reason: str) -> Proposal:
        """The requester withdraws a pending proposal (``cancel``); a decision
        that came first stands (the server answers conflict). The proposal as
        it is now."""
        try:
            res = self.retry(lambda: self.client.cancel(p.id, reason=reason))
        except Conflict:
            return self.read(p.id)
        doc = res.get("proposal")
        return Proposal.from_json(doc) if doc else self.read(p.id)

    def await_holder(self, p: Proposal) -> Proposal:
        """Waits while another holder's lease runs (a concurrent resume, or
        this process's earlier attempt), at most executing_timeout."""
        return await_holder(self.client, p, self.executing_timeout)

    def caller_claimed(self, p: Proposal) -> bool:
        """Whether a caller ran p: its audit trail shows a claim by
        ``caller:<requester>`` (a worker's or the server's own claim is not one)."""
        return claimed_by_caller(self.retry(lambda: self.client.proposal_events(p.id)))

    # -- answers --------------------------------------------------------------

    def classify(self, call: CallRef, ans: CallResult, *, runnable: bool, local: Optional[bool] = None) -> Step:
        """What a call's answer means for the tool call. ``runnable``: this
        process has the tool to run a claim with; a claim it cannot run is
        settled failed at once (certain: nothing ran) and becomes a Verdict.
        ``local`` overrides the gate's own for this call."""
        local = self.local if local is None else local
        s = ans.status
        if s == "execute":
            if not (local and runnable):
                return self.unrunnable(call, ans)
            return Claim(ans)
        if s == "pending":
            return Pending(ans.proposal or self.read(ans.proposal_id or ""))
        if s == "executing":
            p = self.await_holder(ans.proposal or self.read(ans.proposal_id or ""))
            if p.status == "executing":
                return Verdict(still_executing(call.name), True, p)
            if p.status == "approved":
                return Pending(p)  # an idempotent action's lapsed lease: claim it again
            return self.settled(call, p, local=local)
        if s == "denied":
            return Verdict(f"{call.name} was denied ({ans.code}): {ans.reason}; it was not executed", True)
        if s in ("confirmation_required", "confirmation_invalid"):
            return Verdict(f"{call.name}: the rule is two-phase ({s}), which this adapter does not drive; it was not executed", True, ans.proposal)
        if ans.proposal is None:
            # A read action leaves no record: the server ran it.
            if local:
                return self.server_executed(call, None)
            if s == "succeeded":
                return Verdict(content(ans.result), False, None, ans.result, True)
            detail = ans.error or ans.reason or content(ans.result)
            return Verdict(f"{call.name} {s}" + (f": {detail}" if detail else ""), True)
        return self.settled(call, ans.proposal, local=local)

    def settled(self, call: CallRef, p: Proposal, *, local: Optional[bool] = None) -> Verdict:
        """A proposal that is past running: its recorded outcome, or why it
        never ran."""
        local = self.local if local is None else local
        # A success nobody here could have produced is the server's, not the
        # tool's (a failure may have come before any execution, so it is
        # reported as it is).
        if p.status == "succeeded" and local and not self.caller_claimed(p):
            return self.server_executed(call, p)
        if p.status == "succeeded":
            out = p.outcome
            if out is None or out.result is None:
                # Reconciled, or settled without a result: what is known.
                receipt = out.receipt if out is not None else None
                return Verdict(f"{call.name} succeeded" + (f" (receipt {receipt})" if receipt else ""), False, p)
            return Verdict(content(out.result), False, p, out.result, True)
        if p.status == "failed":
            return Verdict(f"{call.name} {p.why()}", True, p)
        if p.uncertain:
            return Verdict(f"{call.name}: {p.why()}. Do not call it again: it may have been applied", True, p)
        return Verdict(f"{call.name} was {p.why()}; it was not executed", True, p)

    def unrunnable(self, call: CallRef, claim: CallResult) -> Verdict:
        """A claim this gate cannot run (no tool here): settled failed at
        once, which is certain, since nothing ran."""
        why = f"{call.action} is executed by its caller, and {call.name} has no tool here to run it: {self.gate_hint}"
        pid, token = claim.proposal_id or "", claim.lease.token if claim.lease else ""
        res = self.retry(lambda: self.client.settle(pid, token, "failed", error=why))
        doc = res.get("proposal")
        return Verdict(why, True, Proposal.from_json(doc) if doc else None)

    def server_executed(self, call: CallRef, p: Optional[Proposal]) -> Verdict:
        """An action the server executes, gated as a tool of this process: the
        tool is not run here, now or ever, for this call."""
        return Verdict(
            f"{call.action} is executed by the server, not by this process, so {call.name} was not run here"
            + (f" (proposal {p.id}, {p.status})" if p is not None else "")
            + f": gate only actions configured execute: {{by: caller}}; {self.action_hint}",
            True,
            p,
        )
