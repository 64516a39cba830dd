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

from dataclasses import dataclass
from typing import Any, Callable, Dict, Literal, Optional, Tuple, Union

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import interrupt
from pydantic import Discriminator
from typing_extensions import Annotated, NotRequired, TypedDict

from countersign import CallResult, LeaseLost, NotApplied, Proposal, Running
from countersign.lease import CALLER_OWNER
from countersign.toolgate import (
    EXECUTION,
    Claim,
    Pending,
    ToolCall,
    ToolGate,
    Verdict,
    current_execution,
    lease_lost,
    not_applied,
    still_executing,
    summary,
    uncertain,
)

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

@dataclass(frozen=True)
class ToolCallRef(ToolCall):
    """One tool call, as Countersign names it, with the tool's description
    for the interrupt."""

    description: str = ""


#: execute(run) runs the tool under the claim: (what the graph gets, the
#: result to record). It raises what the tool raised.
Execute = Callable[[Running], Tuple[Any, Any]]


class Gate(ToolGate):
    """Makes a tool call a Countersign call; see the module's comment and
    countersign.toolgate, which holds what every adapter's gate shares."""

    package = "countersign_langgraph"

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
        p = self.find(call)
        if p is None:
            step = self._step(call, self.wait_seconds, execute)
            if not isinstance(step, Pending):
                return step
            p = step.proposal
        note: Optional[str] = None
        while True:
            if p.status == "pending":
                if self.local and p.mode == "independent":
                    return self._message(call, self.server_executed(call, p))
                answer = interrupt(self._request(call, p, note), response_schema=Answer)
                # The answer is a request: the proposal says what was decided.
                p = self.read(p.id)
                if p.status != "pending":
                    continue
                if isinstance(answer, dict) and answer.get("type") == "reject":
                    p = self.withdraw(p, answer.get("message") or "rejected in the agent's graph (resume)")
                    continue
                note = (
                    "still pending: a resume does not approve; the approvers decide in Countersign, "
                    "then resume again"
                )
                continue
            if p.status == "approved":
                step = self._step(call, 0, execute)
                if not isinstance(step, Pending):
                    return step
                p = step.proposal
                continue
            if p.status == "executing":
                p = self.await_holder(p)
                if p.status == "executing":
                    return self._message(call, Verdict(still_executing(call.name), True, p))
                continue
            return self._message(call, self.settled(call, p))

    def _step(self, call: ToolCallRef, wait: float, execute: Optional[Execute]) -> Any:
        """The call made: Pending, or what the graph gets (the tool's output
        when it ran here, else a ToolMessage)."""
        step = self.classify(call, self.submit(call, wait), runnable=execute is not None)
        if isinstance(step, Claim):
            assert execute is not None
            return self._run_claim(call, step.answer, execute)
        if isinstance(step, Verdict):
            return self._message(call, step)
        return step

    def _run_claim(self, call: ToolCallRef, claim: CallResult, execute: Execute) -> Any:
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
            return self._message(call, Verdict(not_applied(call.name, e), True, run.settled if run else None))
        except LeaseLost:
            return self._message(call, Verdict(lease_lost(call.name), True))
        except GraphBubbleUp:
            raise
        except Exception as e:
            # Anything but NotApplied: the lease context settled nothing, and
            # the lease lapses; the server reconciles it or records it unknown.
            return self._message(call, Verdict(uncertain(call.name, e), True))
        return output

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
            "countersign": {**summary(p), "note": note},
        }

    def _message(self, call: ToolCallRef, v: Verdict) -> ToolMessage:
        p = v.proposal
        return ToolMessage(
            content=v.text,
            name=call.name,
            tool_call_id=call.tool_call_id,
            status="error" if v.error else "success",
            artifact={"countersign": {"proposal_id": p.id if p else None, "status": p.status if p else None}},
        )
