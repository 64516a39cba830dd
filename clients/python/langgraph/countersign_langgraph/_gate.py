"""The one path every gated tool call takes, whichever way it was wrapped
(the tool wrapper, the middleware): a Countersign call, LangGraph's
interrupt() while a human decides, and on resume a fresh read of the
proposal; only an approved proposal is claimed, and only a claim runs the
tool, once, under the lease.

The resume value is a request, never a decision: ``{"type": "reject"}`` of
a proposal still pending cancels it (the requester's withdrawal); any other
value, ``{"type": "approve"}`` included, only asks the gate to look again.
Who decides is Countersign's policy and its approvers, on their channels.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Literal, Optional, Tuple, Union

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import interrupt
from pydantic import Discriminator
from typing_extensions import Annotated, NotRequired, TypedDict

from countersign import CallResult, Client, LeaseLost, NotApplied, Proposal, Running
from countersign import polling as _polling
from countersign.lease import CALLER_OWNER, await_holder, claimed_by_caller

__all__ = [
    "ApproveAnswer",
    "RejectAnswer",
    "Answer",
    "REQUEST_TYPE",
    "CALLER_OWNER",
    "current_execution",
    "Gate",
    "ToolCallRef",
]

#: The interrupt value's ``type``: the shape of HumanInTheLoopMiddleware's
#: per-call ToolApprovalRequest, with the proposal under ``countersign``.
REQUEST_TYPE = "tool_approval"

#: The lease owner the server records for a caller's claim (docs/state-machine.md).


class ApproveAnswer(TypedDict):
    """A resume that asks the gate to look again: it runs the tool only if
    Countersign approved the proposal."""

    type: Literal["approve"]


class RejectAnswer(TypedDict):
    """A resume that withdraws the call: a pending proposal is cancelled."""

    type: Literal["reject"]
    message: NotRequired[str]


#: What a resume may carry for one interrupt (checked by LangGraph before
#: anything runs: any other value fails the resume, and nothing is saved).
Answer = Annotated[Union[ApproveAnswer, RejectAnswer], Discriminator("type")]

_EXECUTION: contextvars.ContextVar[Optional[Running]] = contextvars.ContextVar("countersign_execution", default=None)


def current_execution() -> Optional[Running]:
    """Inside a gated tool, the claim it runs under (operation_id: the
    idempotency key for the backend; proposal_id; attempt; lost); None
    elsewhere. The tool's config carries it too, at
    ``config["configurable"]["countersign"]``."""
    return _EXECUTION.get()


@dataclass(frozen=True)
class ToolCallRef:
    """One tool call, as Countersign names it."""

    thread_id: str
    tool_call_id: str
    #: The tool's name (what the model called).
    name: str
    #: The Countersign action.
    action: str
    args: Any
    description: str = ""


class _Pending:
    def __init__(self, proposal: Proposal) -> None:
        self.proposal = proposal


#: execute(run) runs the tool under the claim: (what the graph gets, the
#: result to record). It raises what the tool raised.
Execute = Callable[[Running], Tuple[Any, Any]]


class Gate:
    """Makes a tool call a Countersign call; see the module's comment.

    ``local``: the tool runs in this process (a caller-executed action);
    False: the server executes the action (a webhook action), and the gate
    only reports its outcome.
    """

    def __init__(
        self,
        client: Client,
        *,
        wait_seconds: float = 0,
        executing_timeout: float = 120,
        local: bool = True,
    ) -> None:
        if not isinstance(client, Client):
            raise TypeError("countersign_langgraph: client must be a countersign.Client")
        if not (0 <= wait_seconds <= _polling.MAX_WAIT_SECONDS):
            raise ValueError(f"countersign_langgraph: wait_seconds must be from 0 to {_polling.MAX_WAIT_SECONDS}")
        if not (executing_timeout >= 0):
            raise ValueError("countersign_langgraph: executing_timeout must be >= 0")
        self.client = client
        self.wait_seconds = wait_seconds
        self.executing_timeout = executing_timeout
        self.local = local

    # -- the path -------------------------------------------------------------

    def run(self, call: ToolCallRef, execute: Optional[Execute]) -> Any:
        """The graph's answer for the tool call: the tool's output when it
        ran here, else a ToolMessage with the recorded outcome, or why it did
        not run. Raises GraphInterrupt (LangGraph's pause) while a human
        decides, NotAnAgent for a credential that is not an agent's, and
        the client's errors for a request the server refused."""
        if not call.thread_id:
            raise TypeError(f"{call.name}: no thread_id in the config's configurable: run the graph with a checkpointer and a thread")
        if not call.tool_call_id:
            raise TypeError(f"{call.name}: no tool call id: invoke it with the model's tool call (a ToolNode does)")
        self.client.require_agent()
        p = self._retry(lambda: self.client.find_call(call.thread_id, call.tool_call_id))
        if p is None:
            got = self._answer(call, self._submit(call, self.wait_seconds), execute)
            if not isinstance(got, _Pending):
                return got
            p = got.proposal
        note: Optional[str] = None
        while True:
            if p.status == "pending":
                if self.local and p.mode == "independent":
                    return self._server_executed(call, p)
                answer = interrupt(self._request(call, p, note), response_schema=Answer)
                # The answer is a request: the proposal says what was decided.
                p = self._retry(lambda: self.client.proposal(p.id))
                if p.status != "pending":
                    continue
                if isinstance(answer, dict) and answer.get("type") == "reject":
                    p = self._cancel(p, answer.get("message"))
                    continue
                note = (
                    "still pending: a resume does not approve; the approvers decide in Countersign, "
                    "then resume again"
                )
                continue
            if p.status == "approved":
                got = self._answer(call, self._submit(call, 0), execute)
                if not isinstance(got, _Pending):
                    return got
                p = got.proposal
                continue
            if p.status == "executing":
                p = self._await_holder(p)
                if p.status == "executing":
                    return self._message(
                        call, p, f"{call.name}: still executing under another holder's lease; its outcome is not known yet", error=True
                    )
                continue
            return self._settled(call, p)

    # -- answers --------------------------------------------------------------

    def _answer(self, call: ToolCallRef, ans: CallResult, execute: Optional[Execute]) -> Any:
        s = ans.status
        if s == "execute":
            if not self.local or execute is None:
                return self._not_ours(call, ans)
            return self._run_claim(call, ans, execute)
        if s == "pending":
            p = ans.proposal or self._retry(lambda: self.client.proposal(ans.proposal_id or ""))
            return _Pending(p)
        if s == "executing":
            p = ans.proposal or self._retry(lambda: self.client.proposal(ans.proposal_id or ""))
            p = self._await_holder(p)
            if p.status == "executing":
                return self._message(call, p, f"{call.name}: still executing under another holder's lease; its outcome is not known yet", error=True)
            if p.status == "approved":
                return _Pending(p)  # an idempotent action's lapsed lease: claim it again
            return self._settled(call, p)
        if s == "denied":
            return self._message(call, None, f"{call.name} was denied ({ans.code}): {ans.reason}; it was not executed", error=True)
        if s in ("confirmation_required", "confirmation_invalid"):
            return self._message(
                call, ans.proposal, f"{call.name}: the rule is two-phase ({s}), which this adapter does not drive; it was not executed", error=True
            )
        if ans.proposal is None:
            # A read action leaves no record: the server ran it.
            if self.local:
                return self._server_executed(call, None)
            return self._message(call, None, _content(ans.result), error=s != "succeeded")
        return self._settled(call, ans.proposal)

    def _settled(self, call: ToolCallRef, p: Proposal) -> Any:
        """A proposal that is past running: its recorded outcome, or why it never ran."""
        # A success nobody here could have produced is the server's, not
        # the tool's (a failure may have come before any execution, so it is
        # reported as it is).
        if p.status == "succeeded" and self.local and not self._caller_claimed(p):
            return self._server_executed(call, p)
        if p.status == "succeeded":
            result = p.outcome.result if p.outcome is not None else None
            return self._message(call, p, _content(result), error=False)
        if p.status == "failed":
            return self._message(call, p, f"{call.name} failed: {p.why()}", error=True)
        if p.uncertain:
            return self._message(call, p, f"{call.name}: {p.why()}. Do not call it again: it may have been applied", error=True)
        return self._message(call, p, f"{call.name} was {p.why()}; it was not executed", error=True)

    def _run_claim(self, call: ToolCallRef, claim: CallResult, execute: Execute) -> Any:
        """Runs the tool once under the claim's lease (countersign.lease):
        settled on success or NotApplied, left uncertain on anything else."""
        try:
            with self.client.lease(claim) as run:
                token = _EXECUTION.set(run)
                try:
                    output, result = execute(run)
                finally:
                    _EXECUTION.reset(token)
                run.succeeded(result=result)
        except NotApplied as e:
            return self._message(call, run.settled, f"{call.name} failed: not applied: {e}", error=True)
        except LeaseLost:
            return self._message(
                call, None, f"{call.name} ran, but its lease was lost before the outcome was recorded; Countersign reconciles it", error=True
            )
        except GraphBubbleUp:
            raise
        except Exception as e:
            # Anything but NotApplied: the lease context settled nothing, and
            # the lease lapses; the server reconciles it or records it unknown.
            return self._message(
                call,
                None,
                f"{call.name}: the outcome is uncertain ({type(e).__name__}: {e}); nothing was recorded, and "
                "Countersign reconciles it. Do not call it again: it may have been applied",
                error=True,
            )
        return output

    def _not_ours(self, call: ToolCallRef, claim: CallResult) -> Any:
        """A claim this gate cannot run (no tool here): settled failed at
        once, which is certain, since nothing ran."""
        why = f"{call.action} is executed by its caller, and {call.name} has no tool here to run it: wrap the tool with gated()"
        pid, token = claim.proposal_id or "", claim.lease.token if claim.lease else ""
        res = self._retry(lambda: self.client.settle(pid, token, "failed", error=why))
        p = Proposal.from_json(res.get("proposal")) if res.get("proposal") else None
        return self._message(call, p, why, error=True)

    def _server_executed(self, call: ToolCallRef, p: Optional[Proposal]) -> Any:
        why = (
            f"{call.action} is executed by the server, not by this process, so {call.name} was not run here"
            + (f" (proposal {p.id}, {p.status})" if p is not None else "")
            + ": gate only actions configured execute: {by: caller}; use action_tool() for a server-executed action"
        )
        return self._message(call, p, why, error=True)

    def _caller_claimed(self, p: Proposal) -> bool:
        """Whether a caller ran p: its audit trail shows a claim by
        ``caller:<requester>`` (a worker's or the server's own claim is not one)."""
        return claimed_by_caller(self._retry(lambda: self.client.proposal_events(p.id)))

    # -- requests -------------------------------------------------------------

    def _submit(self, call: ToolCallRef, wait: float) -> CallResult:
        return self._retry(lambda: self.client.submit(call.thread_id, call.tool_call_id, call.action, call.args, wait_seconds=wait))

    def _cancel(self, p: Proposal, message: Optional[str]) -> Proposal:
        """The requester withdraws a pending proposal; a decision that came
        first stands (conflict), and the proposal as it is now is returned."""
        reason = message or "rejected in the agent's graph (resume)"
        res = self._retry(lambda: self.client.cancel(p.id, reason=reason))
        doc = res.get("proposal")
        return Proposal.from_json(doc) if doc else self._retry(lambda: self.client.proposal(p.id))

    def _await_holder(self, p: Proposal) -> Proposal:
        """Waits while another holder's lease runs (a concurrent resume, or
        this process's earlier attempt), at most executing_timeout."""
        return await_holder(self.client, p, self.executing_timeout)

    def _retry(self, fn: Callable[[], Any]) -> Any:
        """fn, asked again on the client's schedule while the server answers
        429 or 5xx or cannot be reached; other errors are verdicts."""
        return _polling.retried(self.client.pacing, fn)

    # -- what the graph sees --------------------------------------------------

    def _request(self, call: ToolCallRef, p: Proposal, note: Optional[str]) -> Dict[str, Any]:
        """The interrupt's value: HumanInTheLoopMiddleware's per-call
        ToolApprovalRequest, with the proposal under ``countersign``."""
        return {
            "type": REQUEST_TYPE,
            "tool_call_id": call.tool_call_id,
            "name": call.name,
            "args": call.args,
            "description": call.description or p.preview,
            "countersign": {
                "proposal_id": p.id,
                "action": p.action,
                "thread_id": p.thread_id,
                "status": p.status,
                "preview": p.preview,
                "approvers": p.approvers,
                "expires_at": p.expires_at,
                "input_digest": p.input_digest,
                "note": note,
                "proposal": p.raw,
            },
        }

    def _message(self, call: ToolCallRef, p: Optional[Proposal], content: str, *, error: bool) -> ToolMessage:
        return ToolMessage(
            content=content,
            name=call.name,
            tool_call_id=call.tool_call_id,
            status="error" if error else "success",
            artifact={"countersign": {"proposal_id": p.id if p else None, "status": p.status if p else None}},
        )


def _content(result: Any) -> str:
    """A recorded result as a tool message's content: a string as it is,
    anything else as JSON."""
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    return json.dumps(result)
