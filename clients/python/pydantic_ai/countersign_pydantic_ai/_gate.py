"""The one path every gated tool call takes: a Countersign call, Pydantic
AI's own deferral (ApprovalRequired, so the run ends with
DeferredToolRequests) while a human decides, and on resume a fresh read of
the proposal; only an approved proposal is claimed, and only a claim runs
the tool, once, under the lease.

What a resume's DeferredToolResults says is a request, never a decision:
``ToolDenied`` (or ``False``) of a proposal still pending cancels it (the
requester's withdrawal); ``True`` / ``ToolApproved()`` only asks the guard
to look again. ``ToolApproved(override_args=…)`` is refused unless the
arguments are exactly those of the proposal (what the approvers saw).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Dict, Optional

from countersign import CallResult, Client, Invalid, LeaseLost, NotApplied, Proposal
from countersign.lease import CALLER_OWNER
from countersign.toolgate import (
    EXECUTION,
    Claim,
    Pending,
    ToolGate,
    Verdict,
    current_execution,
    lease_lost,
    not_applied,
    still_executing,
    summary,
    uncertain,
)

from pydantic_ai import ApprovalRequired, ModelRetry, ToolFailed

__all__ = ["Gate", "ToolCallRef", "ResumeRefused", "current_execution", "same_input", "CALLER_OWNER", "METADATA_KEY"]

#: The lease owner the server records for a caller's claim (docs/state-machine.md).

#: The key of DeferredToolRequests.metadata[tool_call_id] that carries the proposal.
METADATA_KEY = "countersign"

class ResumeRefused(Exception):
    """A resume that asks for something Countersign did not approve: a
    ``ToolApproved(override_args=…)`` whose arguments are not the
    proposal's, or a result supplied for a gated call (whose result is
    what ran under its lease). Raised before any tool of the resume runs."""

    def __init__(self, tool_call_id: str, message: str) -> None:
        super().__init__(message)
        self.tool_call_id = tool_call_id


class ToolCallRef:
    """One tool call, as Countersign names it."""

    def __init__(self, thread_id: str, tool_call_id: str, name: str, action: str, args: Any, approved: bool, validated: Any = None) -> None:
        self.thread_id = thread_id
        self.tool_call_id = tool_call_id
        self.name = name
        self.action = action
        #: The arguments as JSON: what is proposed, and compared with the proposal.
        self.args = args
        #: The arguments as the framework validated them: what the tool is called with.
        self.validated = validated if validated is not None else args
        #: Whether the framework resumed this call as approved (a request, not a decision).
        self.approved = approved


#: handler(args) runs the tool (Pydantic AI's wrap_tool_execute handler).
Handler = Callable[[Any], Any]


def same_input(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same input: objects by key, numbers
    by value (12 is 12.0), and a bool never a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_input(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_input(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def jsonable(v: Any) -> Any:
    """A tool's arguments or result as JSON gives it back (pydantic types
    included; anything else as its str)."""
    from pydantic_core import to_jsonable_python

    return json.loads(json.dumps(to_jsonable_python(v, fallback=str)))


class Gate(ToolGate):
    """Makes a tool call a Countersign call; see the module's comment and
    countersign.toolgate, which holds what every adapter's gate shares.
    Whether the tool runs here (``local``) is said by each call to run():
    one gate serves a capability's caller-executed tools and its
    server-executed actions."""

    package = "countersign_pydantic_ai"
    gate_hint = "gate it with tools={...}"
    action_hint = "offer a server-executed action with actions=[...]"

    def __init__(self, client: Client, *, wait_seconds: float = 0, executing_timeout: float = 120) -> None:
        super().__init__(client, wait_seconds=wait_seconds, executing_timeout=executing_timeout)

    # -- the path -------------------------------------------------------------

    async def run(self, call: ToolCallRef, handler: Optional[Handler], *, local: bool) -> Any:
        """The tool's result for the model: what the tool returned when it
        ran here, else the recorded outcome; raises ApprovalRequired (Pydantic
        AI's deferral) while a human decides, ToolFailed with why it did not
        run, NotAnAgent for a credential that is not an agent's, and the
        client's errors for a request the server refused."""
        if not call.thread_id:
            raise TypeError(f"{call.name}: no thread id (the run's conversation_id): run the agent as Agent.run does")
        if not call.tool_call_id:
            raise TypeError(f"{call.name}: no tool call id")
        await asyncio.to_thread(self.retry, self.client.require_agent)
        p: Optional[Proposal] = await asyncio.to_thread(self.find, call)
        if p is None:
            got = await self._answer(call, await self._submit(call, self.wait_seconds), handler, local)
            if not isinstance(got, Pending):
                return got
            p = got.proposal
        elif not same_input(p.input, call.args):
            # The proposal holds what the approvers saw; anything else
            # (override_args, a rewritten history) is not what they approved.
            raise ResumeRefused(
                call.tool_call_id,
                f"{call.name}: the arguments differ from those of proposal {p.id}, which is what Countersign "
                "decides on; nothing was run",
            )
        while True:
            if p.status == "pending":
                if local and p.mode == "independent":
                    raise ToolFailed(self.server_executed(call, p).text)
                note = None
                if call.approved:
                    note = "still pending: a resume does not approve; the approvers decide in Countersign, then resume again"
                raise ApprovalRequired(metadata={METADATA_KEY: self._request(call, p, note)})
            if p.status == "approved":
                got = await self._answer(call, await self._submit(call, 0), handler, local)
                if not isinstance(got, Pending):
                    return got
                p = got.proposal
                continue
            if p.status == "executing":
                p = await asyncio.to_thread(self.await_holder, p)
                if p.status == "executing":
                    raise ToolFailed(still_executing(call.name))
                continue
            return _deliver(await asyncio.to_thread(lambda: self.settled(call, p, local=local)))  # type: ignore[arg-type]

    # -- answers --------------------------------------------------------------

    async def _answer(self, call: ToolCallRef, ans: CallResult, handler: Optional[Handler], local: bool) -> Any:
        """The call's answer: Pending, or the tool's result for the model
        (raising ToolFailed with why it did not run)."""
        step = await asyncio.to_thread(lambda: self.classify(call, ans, runnable=handler is not None, local=local))
        if isinstance(step, Claim):
            assert handler is not None
            return await self._run_claim(call, step.answer, handler)
        if isinstance(step, Pending):
            return step
        return _deliver(step)

    async def _run_claim(self, call: ToolCallRef, claim: CallResult, handler: Handler) -> Any:
        """Runs the tool once under the claim's lease (countersign.lease):
        settled on success or NotApplied, left uncertain on anything else."""
        lease = self.client.lease(claim)
        run = lease.__enter__()
        token = EXECUTION.set(run)
        err: Optional[BaseException] = None
        try:
            out = await handler(call.validated)
        except Exception as e:
            err = e
        except BaseException as e:
            # Cancelled (or the process is going down) mid-execution: the
            # renewals stop and nothing is settled; the server decides.
            lease.__exit__(type(e), e, e.__traceback__)
            raise
        finally:
            EXECUTION.reset(token)
        try:
            if err is None:
                run.succeeded(result=jsonable(out))
                await asyncio.to_thread(lease.__exit__, None, None, None)
                return out
            await asyncio.to_thread(lease.__exit__, type(err), err, err.__traceback__)
        except LeaseLost:
            raise ToolFailed(lease_lost(call.name)) from None
        if isinstance(err, NotApplied):
            raise ToolFailed(not_applied(call.name, err)) from None
        # Anything but NotApplied: the lease context settled nothing, and the
        # lease lapses; the server reconciles it or records it unknown.
        raise ToolFailed(uncertain(call.name, err)) from None

    # -- requests -------------------------------------------------------------

    async def _submit(self, call: ToolCallRef, wait: float) -> CallResult:
        try:
            return await asyncio.to_thread(self.submit, call, wait)
        except Invalid as e:
            if e.code != "INVALID_INPUT":
                raise
            # The action's input schema refused the arguments: the model
            # may correct them (a new tool call, a new proposal).
            raise ModelRetry(f"{call.name}: invalid input: {e.message} {json.dumps(e.details) if e.details else ''}".rstrip()) from None

    def cancel_pending(self, thread_id: str, tool_call_id: str, message: Optional[str]) -> Optional[Proposal]:
        """A framework "reject" of a tool call: its proposal, if still
        pending, is cancelled (the requester's withdrawal); a decision that
        came first stands. The proposal as it is now, or None if the call
        has none."""
        p = self.retry(lambda: self.client.find_call(thread_id, tool_call_id))
        if p is None or p.status != "pending":
            return p
        return self.withdraw(p, message or "denied in the agent's run (DeferredToolResults)")

    # -- what the caller sees ---------------------------------------------------

    def _request(self, call: ToolCallRef, p: Proposal, note: Optional[str]) -> Dict[str, Any]:
        """DeferredToolRequests.metadata[tool_call_id]["countersign"]."""
        return {**summary(p), "note": note}


def _deliver(v: Verdict) -> Any:
    """A verdict as the tool's result for the model: a success's recorded
    result; anything else raises ToolFailed with why."""
    if v.error:
        raise ToolFailed(v.text)
    return v.result
