"""The one path every gated ADK tool call takes: a Countersign call, ADK's
tool confirmation while a human decides, and, when the run is resumed with
the confirmation's answer, a fresh read of the proposal; only an approved
proposal is claimed, and only a claim runs the tool, once, under the lease.

This module knows nothing of ADK: it answers either ``Ask`` (request a
confirmation, whose payload carries the proposal) or the tool's function
response. The caller (tools.py) turns ``Ask`` into
``tool_context.request_confirmation``.

The confirmation's answer is a request, never a decision: ``confirmed:
false`` of a proposal still pending cancels it (the requester's withdrawal);
``confirmed: true`` only asks the gate to look again (of a proposal still
pending, it waits a while for the approvers, then ends the call unexecuted:
ADK cannot ask a second time from its resume path). Who decides is
Countersign's policy and its approvers, on their channels.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple, Union

from countersign import CallResult, Client, LeaseLost, NotApplied, Proposal, Running
from countersign import polling as _polling
from countersign.lease import CALLER_OWNER, await_holder, claimed_by_caller

__all__ = ["Ask", "Gate", "ToolCallRef", "current_execution", "CALLER_OWNER", "PAYLOAD_KEY"]

#: The lease owner the server records for a caller's claim (docs/state-machine.md).

#: The key of the confirmation payload (and of a function response) that
#: holds what Countersign says.
PAYLOAD_KEY = "countersign"

_EXECUTION: contextvars.ContextVar[Optional[Running]] = contextvars.ContextVar("countersign_adk_execution", default=None)


def current_execution() -> Optional[Running]:
    """Inside a gated tool's function, the claim it runs under
    (operation_id: the idempotency key for the backend; proposal_id;
    attempt; lost); None elsewhere."""
    return _EXECUTION.get()


@dataclass(frozen=True)
class ToolCallRef:
    """One tool call, as Countersign names it."""

    #: The Countersign thread: the ADK session's id (or what the tool's ``thread`` made of it).
    thread_id: str
    #: ADK's function call id (the model's, or the one ADK gave it).
    tool_call_id: str
    #: The tool's name (what the model called).
    name: str
    #: The Countersign action.
    action: str
    args: Any


@dataclass(frozen=True)
class Ask:
    """The call waits for Countersign's approvers: ADK's tool confirmation
    is requested, its payload carrying the proposal."""

    proposal: Proposal


class _Pending:
    def __init__(self, proposal: Proposal) -> None:
        self.proposal = proposal


#: execute(run) runs the tool under the claim: (its function response, the
#: result to record). It raises what the tool raised.
Execute = Callable[[Running], Tuple[Any, Any]]

#: What the gate answers: a confirmation to ask for, or the function response.
Verdict = Union[Ask, Dict[str, Any]]



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
        resume_wait_seconds: float = 60,
        executing_timeout: float = 120,
        local: bool = True,
    ) -> None:
        if not isinstance(client, Client):
            raise TypeError("countersign_google_adk: client must be a countersign.Client")
        if not (0 <= wait_seconds <= _polling.MAX_WAIT_SECONDS):
            raise ValueError(f"countersign_google_adk: wait_seconds must be from 0 to {_polling.MAX_WAIT_SECONDS}")
        if not (0 <= resume_wait_seconds < float("inf")):
            raise ValueError("countersign_google_adk: resume_wait_seconds must be a finite number >= 0")
        if not (executing_timeout >= 0):
            raise ValueError("countersign_google_adk: executing_timeout must be >= 0")
        self.client = client
        self.wait_seconds = wait_seconds
        self.resume_wait_seconds = resume_wait_seconds
        self.executing_timeout = executing_timeout
        self.local = local

    # -- the path -------------------------------------------------------------

    def run(self, call: ToolCallRef, confirmed: Optional[bool], execute: Optional[Execute]) -> Verdict:
        """The tool call's verdict. ``confirmed`` is the answer of ADK's
        confirmation when the run was resumed with one (None on the first
        run): a request, read as the module's comment says. Raises
        NotAnAgent for a credential that is not an agent's, and the client's
        errors for a request the server refused."""
        if not call.thread_id:
            raise TypeError(f"{call.name}: no session id: run the agent with an ADK Runner and a session")
        if not call.tool_call_id:
            raise TypeError(f"{call.name}: no function call id: run the tool through an ADK agent")
        self.client.require_agent()
        p = self._retry(lambda: self.client.find_call(call.thread_id, call.tool_call_id))
        if p is None:
            # No proposal yet: this is the call's first run (an answer to a
            # confirmation nobody asked here changes nothing: it never decides).
            got = self._answer(call, self._submit(call, self.wait_seconds), execute)
            if not isinstance(got, _Pending):
                return got
            p = got.proposal
            confirmed = None
        while True:
            if p.status == "pending":
                if self.local and p.mode == "independent":
                    return self._server_executed(call, p)
                if confirmed is False:
                    confirmed = None
                    p = self._cancel(p)
                    continue
                if confirmed:
                    # Confirmed before Countersign's approvers decided. ADK
                    # cannot ask again from its resume path (a confirmation
                    # requested there makes no new confirmation call), so the
                    # call waits for their decision a while, then ends
                    # unexecuted: the confirmation did not approve it.
                    confirmed = None
                    p = self._await_decision(p)
                    if p.status == "pending":
                        return self._error(
                            call,
                            p,
                            f"{call.name} is still waiting for a decision in Countersign (proposal {p.id}, for "
                            f"{', '.join(p.approvers) or 'its approvers'}): a confirmation does not approve, and nobody "
                            f"decided within {self.resume_wait_seconds:g} s; it was not executed",
                        )
                    continue
                return Ask(p)
            if p.status == "approved":
                got = self._answer(call, self._submit(call, 0), execute)
                if not isinstance(got, _Pending):
                    return got
                p = got.proposal
                if p.status == "pending":
                    confirmed = None
                continue
            if p.status == "executing":
                p = self._await_holder(p)
                if p.status == "executing":
                    return self._error(call, p, f"{call.name}: still executing under another holder's lease; its outcome is not known yet")
                continue
            return self._settled(call, p)

    # -- answers --------------------------------------------------------------

    def _answer(self, call: ToolCallRef, ans: CallResult, execute: Optional[Execute]) -> Union[_Pending, Dict[str, Any]]:
        s = ans.status
        if s == "execute":
            if not self.local or execute is None:
                return self._not_ours(call, ans)
            return self._run_claim(call, ans, execute)
        if s == "pending":
            return _Pending(ans.proposal or self._retry(lambda: self.client.proposal(ans.proposal_id or "")))
        if s == "executing":
            p = ans.proposal or self._retry(lambda: self.client.proposal(ans.proposal_id or ""))
            p = self._await_holder(p)
            if p.status == "executing":
                return self._error(call, p, f"{call.name}: still executing under another holder's lease; its outcome is not known yet")
            if p.status == "approved":
                return _Pending(p)  # an idempotent action's lapsed lease: claim it again
            return self._settled(call, p)
        if s == "denied":
            return self._error(call, None, f"{call.name} was denied ({ans.code}): {ans.reason}; it was not executed")
        if s in ("confirmation_required", "confirmation_invalid"):
            return self._error(call, ans.proposal, f"{call.name}: the rule is two-phase ({s}), which this adapter does not drive; it was not executed")
        if ans.proposal is None:
            # A read action leaves no record: the server ran it.
            if self.local:
                return self._server_executed(call, None)
            if s == "succeeded":
                return self._result(ans.result)
            return self._error(call, None, f"{call.name} failed: {ans.error or s}")
        return self._settled(call, ans.proposal)

    def _settled(self, call: ToolCallRef, p: Proposal) -> Dict[str, Any]:
        """A proposal that is past running: its recorded outcome, or why it never ran."""
        # A success nobody here could have produced is the server's, not
        # the tool's (a failure may have come before any execution, so it is
        # reported as it is).
        if p.status == "succeeded" and self.local and not self._caller_claimed(p):
            return self._server_executed(call, p)
        if p.status == "succeeded":
            return self._result(p.outcome.result if p.outcome is not None else None)
        if p.status == "failed":
            return self._error(call, p, f"{call.name} failed: {p.why()}")
        if p.uncertain:
            return self._error(call, p, f"{call.name}: {p.why()}. Do not call it again: it may have been applied")
        return self._error(call, p, f"{call.name} was {p.why()}; it was not executed")

    def _run_claim(self, call: ToolCallRef, claim: CallResult, execute: Execute) -> Dict[str, Any]:
        """Runs the tool once under the claim's lease (countersign.lease):
        settled on success or NotApplied, left uncertain on anything else."""
        run: Optional[Running] = None
        try:
            with self.client.lease(claim) as run:
                token = _EXECUTION.set(run)
                try:
                    output, result = execute(run)
                finally:
                    _EXECUTION.reset(token)
                run.succeeded(result=result)
        except NotApplied as e:
            return self._error(call, run.settled if run else None, f"{call.name} failed: not applied: {e}")
        except LeaseLost:
            return self._error(call, None, f"{call.name} ran, but its lease was lost before the outcome was recorded; Countersign reconciles it")
        except Exception as e:
            # Anything but NotApplied: the lease context settled nothing, and
            # the lease lapses; the server reconciles it or records it unknown.
            return self._error(
                call,
                None,
                f"{call.name}: the outcome is uncertain ({type(e).__name__}: {e}); nothing was recorded, and "
                "Countersign reconciles it. Do not call it again: it may have been applied",
            )
        return self._result(output)

    def _not_ours(self, call: ToolCallRef, claim: CallResult) -> Dict[str, Any]:
        """A claim this gate cannot run (no tool here): settled failed at
        once, which is certain, since nothing ran."""
        why = f"{call.action} is executed by its caller, and {call.name} has no function here to run it: wrap the function with gated()"
        pid, token = claim.proposal_id or "", claim.lease.token if claim.lease else ""
        res = self._retry(lambda: self.client.settle(pid, token, "failed", error=why))
        p = Proposal.from_json(res.get("proposal")) if res.get("proposal") else None
        return self._error(call, p, why)

    def _server_executed(self, call: ToolCallRef, p: Optional[Proposal]) -> Dict[str, Any]:
        why = (
            f"{call.action} is executed by the server, not by this process, so {call.name} was not run here"
            + (f" (proposal {p.id}, {p.status})" if p is not None else "")
            + ": gate only actions configured execute: {by: caller}; use action_tool() for a server-executed action"
        )
        return self._error(call, p, why)

    def _caller_claimed(self, p: Proposal) -> bool:
        """Whether a caller ran p: its audit trail shows a claim by
        ``caller:<requester>`` (a worker's or the server's own claim is not one)."""
        return claimed_by_caller(self._retry(lambda: self.client.proposal_events(p.id)))

    # -- requests -------------------------------------------------------------

    def _submit(self, call: ToolCallRef, wait: float) -> CallResult:
        return self._retry(lambda: self.client.submit(call.thread_id, call.tool_call_id, call.action, call.args, wait_seconds=wait))

    def _cancel(self, p: Proposal) -> Proposal:
        """The requester withdraws a pending proposal; a decision that came
        first stands (conflict), and the proposal as it is now is returned."""
        res = self._retry(lambda: self.client.cancel(p.id, reason="declined in the agent's ADK tool confirmation"))
        doc = res.get("proposal")
        return Proposal.from_json(doc) if doc else self._retry(lambda: self.client.proposal(p.id))

    def _await_decision(self, p: Proposal) -> Proposal:
        """Reads p on the client's schedule while it is pending, at most
        resume_wait_seconds. (A long-poll would not do: it answers at a
        terminal status, and an approved caller-executed proposal stays
        approved until it is claimed.)"""
        pacing = self.client.pacing
        deadline = pacing.clock() + self.resume_wait_seconds
        pacer = pacing.pacer()
        while p.status == "pending" and pacer.wait(deadline):
            p = self._retry(lambda: self.client.proposal(p.id))
        return p

    def _await_holder(self, p: Proposal) -> Proposal:
        """Waits while another holder's lease runs (a concurrent resume, or
        this process's earlier attempt), at most executing_timeout."""
        return await_holder(self.client, p, self.executing_timeout)

    def _retry(self, fn: Callable[[], Any]) -> Any:
        """fn, asked again on the client's schedule while the server answers
        429 or 5xx or cannot be reached; other errors are verdicts."""
        return _polling.retried(self.client.pacing, fn)

    # -- what the model sees --------------------------------------------------

    @staticmethod
    def _ref(p: Optional[Proposal]) -> Dict[str, Any]:
        return {"proposal_id": p.id if p else None, "status": p.status if p else None}

    @staticmethod
    def _result(result: Any) -> Dict[str, Any]:
        """A result as the function response: what the tool itself answers
        (ADK's own shape for a value that is not a dict: ``{"result":
        value}``), whether it ran here now or its recorded outcome is read."""
        return dict(result) if isinstance(result, dict) else {"result": result}

    def _error(self, call: ToolCallRef, p: Optional[Proposal], message: str) -> Dict[str, Any]:
        return {"error": message, PAYLOAD_KEY: self._ref(p)}


def request_payload(call: ToolCallRef, p: Proposal) -> Dict[str, Any]:
    """The confirmation's payload: what the human is asked about, the
    proposal under ``countersign``. The payload a resume sends back is
    never read: the proposal is the tool call's, found by session and
    function call id."""
    return {
        PAYLOAD_KEY: {
            "proposal_id": p.id,
            "action": p.action,
            "thread_id": p.thread_id,
            "tool_call_id": call.tool_call_id,
            "status": p.status,
            "preview": p.preview,
            "approvers": p.approvers,
            "expires_at": p.expires_at,
            "input_digest": p.input_digest,
            "proposal": p.raw,
        }
    }
