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

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple, Union

from countersign import CallResult, Client, LeaseLost, NotApplied, Proposal, Running, toolgate
from countersign.lease import CALLER_OWNER
from countersign.toolgate import (
    EXECUTION,
    Claim,
    Pending,
    ToolCall,
    ToolGate,
    current_execution,
    lease_lost,
    not_applied,
    still_executing,
    summary,
    uncertain,
)

__all__ = ["Ask", "Gate", "ToolCallRef", "current_execution", "CALLER_OWNER", "PAYLOAD_KEY"]

#: The lease owner the server records for a caller's claim (docs/state-machine.md).

#: The key of the confirmation payload (and of a function response) that
#: holds what Countersign says.
PAYLOAD_KEY = "countersign"

#: One tool call, as Countersign names it: the thread is the ADK session's
#: id (or what the tool's ``thread`` made of it), the tool call id ADK's
#: function call id (the model's, or the one ADK gave it).
ToolCallRef = ToolCall


@dataclass(frozen=True)
class Ask:
    """The call waits for Countersign's approvers: ADK's tool confirmation
    is requested, its payload carrying the proposal."""

    proposal: Proposal


#: execute(run) runs the tool under the claim: (its function response, the
#: result to record). It raises what the tool raised.
Execute = Callable[[Running], Tuple[Any, Any]]

#: What the gate answers: a confirmation to ask for, or the function response.
Verdict = Union[Ask, Dict[str, Any]]


class Gate(ToolGate):
    """Makes a tool call a Countersign call; see the module's comment and
    countersign.toolgate, which holds what every adapter's gate shares.
    ``resume_wait_seconds``: how long a confirmed resume of a proposal still
    pending waits for the approvers before it ends the call unexecuted."""

    package = "countersign_google_adk"
    gate_hint = "wrap the function with gated()"

    def __init__(
        self,
        client: Client,
        *,
        wait_seconds: float = 0,
        resume_wait_seconds: float = 60,
        executing_timeout: float = 120,
        local: bool = True,
    ) -> None:
        super().__init__(client, wait_seconds=wait_seconds, executing_timeout=executing_timeout, local=local)
        if not (0 <= resume_wait_seconds < float("inf")):
            raise ValueError("countersign_google_adk: resume_wait_seconds must be a finite number >= 0")
        self.resume_wait_seconds = resume_wait_seconds

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
        p = self.find(call)
        if p is None:
            # No proposal yet: this is the call's first run (an answer to a
            # confirmation nobody asked here changes nothing: it never decides).
            step = self._step(call, self.wait_seconds, execute)
            if not isinstance(step, Pending):
                return step
            p = step.proposal
            confirmed = None
        while True:
            if p.status == "pending":
                if self.local and p.mode == "independent":
                    return self._response(self.server_executed(call, p))
                if confirmed is False:
                    confirmed = None
                    p = self.withdraw(p, "declined in the agent's ADK tool confirmation")
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
                            p,
                            f"{call.name} is still waiting for a decision in Countersign (proposal {p.id}, for "
                            f"{', '.join(p.approvers) or 'its approvers'}): a confirmation does not approve, and nobody "
                            f"decided within {self.resume_wait_seconds:g} s; it was not executed",
                        )
                    continue
                return Ask(p)
            if p.status == "approved":
                step = self._step(call, 0, execute)
                if not isinstance(step, Pending):
                    return step
                p = step.proposal
                if p.status == "pending":
                    confirmed = None
                continue
            if p.status == "executing":
                p = self.await_holder(p)
                if p.status == "executing":
                    return self._error(p, still_executing(call.name))
                continue
            return self._response(self.settled(call, p))

    def _step(self, call: ToolCallRef, wait: float, execute: Optional[Execute]) -> Union[Pending, Dict[str, Any]]:
        """The call made: Pending, or the function response."""
        step = self.classify(call, self.submit(call, wait), runnable=execute is not None)
        if isinstance(step, Claim):
            assert execute is not None
            return self._run_claim(call, step.answer, execute)
        if isinstance(step, toolgate.Verdict):
            return self._response(step)
        return step

    def _run_claim(self, call: ToolCallRef, claim: CallResult, execute: Execute) -> Dict[str, Any]:
        """Runs the tool once under the claim's lease (countersign.lease):
        settled on success or NotApplied, left uncertain on anything else."""
        run: Optional[Running] = None
        try:
            with self.client.lease(claim) as run:
                token = EXECUTION.set(run)
                try:
                    output, result = execute(run)
                finally:
                    EXECUTION.reset(token)
                run.succeeded(result=result)
        except NotApplied as e:
            return self._error(run.settled if run else None, not_applied(call.name, e))
        except LeaseLost:
            return self._error(None, lease_lost(call.name))
        except Exception as e:
            # Anything but NotApplied: the lease context settled nothing, and
            # the lease lapses; the server reconciles it or records it unknown.
            return self._error(None, uncertain(call.name, e))
        return self._result(output)

    def _await_decision(self, p: Proposal) -> Proposal:
        """Reads p on the client's schedule while it is pending, at most
        resume_wait_seconds. (A long-poll would not do: it answers at a
        terminal status, and an approved caller-executed proposal stays
        approved until it is claimed.)"""
        pacing = self.client.pacing
        deadline = pacing.clock() + self.resume_wait_seconds
        pacer = pacing.pacer()
        while p.status == "pending" and pacer.wait(deadline):
            p = self.read(p.id)
        return p

    # -- what the model sees --------------------------------------------------

    def _response(self, v: toolgate.Verdict) -> Dict[str, Any]:
        """A verdict as the function response: a success as the tool's own
        recorded result (None where none was recorded), else an error."""
        if v.error:
            return self._error(v.proposal, v.text)
        return self._result(v.result)

    @staticmethod
    def _result(result: Any) -> Dict[str, Any]:
        """A result as the function response: what the tool itself answers
        (ADK's own shape for a value that is not a dict: ``{"result":
        value}``), whether it ran here now or its recorded outcome is read."""
        return dict(result) if isinstance(result, dict) else {"result": result}

    @staticmethod
    def _error(p: Optional[Proposal], message: str) -> Dict[str, Any]:
        return {"error": message, PAYLOAD_KEY: {"proposal_id": p.id if p else None, "status": p.status if p else None}}


def request_payload(call: ToolCallRef, p: Proposal) -> Dict[str, Any]:
    """The confirmation's payload: what the human is asked about, the
    proposal under ``countersign``. The payload a resume sends back is
    never read: the proposal is the tool call's, found by session and
    function call id."""
    return {PAYLOAD_KEY: {**summary(p), "tool_call_id": call.tool_call_id}}
