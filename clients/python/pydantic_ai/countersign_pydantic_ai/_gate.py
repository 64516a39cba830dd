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
import contextvars
import json
from typing import Any, Callable, Dict, Optional

from countersign import CallResult, Client, Invalid, LeaseLost, NotApplied, Proposal, Running
from countersign import polling as _polling
from countersign.lease import CALLER_OWNER, await_holder, claimed_by_caller

from pydantic_ai import ApprovalRequired, ModelRetry, ToolFailed

__all__ = ["Gate", "ToolCallRef", "ResumeRefused", "current_execution", "same_input", "CALLER_OWNER", "METADATA_KEY"]

#: The lease owner the server records for a caller's claim (docs/state-machine.md).

#: The key of DeferredToolRequests.metadata[tool_call_id] that carries the proposal.
METADATA_KEY = "countersign"

_EXECUTION: contextvars.ContextVar[Optional[Running]] = contextvars.ContextVar("countersign_pydantic_ai_execution", default=None)


def current_execution() -> Optional[Running]:
    """Inside a gated tool, the claim it runs under (``operation_id``: the
    idempotency key for the backend; ``proposal_id``; ``attempt``;
    ``lost``); None elsewhere."""
    return _EXECUTION.get()


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


class _Pending:
    def __init__(self, proposal: Proposal) -> None:
        self.proposal = proposal


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


class Gate:
    """Makes a tool call a Countersign call; see the module's comment.

    ``local``: the tool runs in this process (a caller-executed action);
    False: the server executes the action (a webhook action), and the gate
    only reports its outcome."""

    def __init__(self, client: Client, *, wait_seconds: float = 0, executing_timeout: float = 120) -> None:
        if not isinstance(client, Client):
            raise TypeError("countersign_pydantic_ai: client must be a countersign.Client")
        if not (0 <= wait_seconds <= _polling.MAX_WAIT_SECONDS):
            raise ValueError(f"countersign_pydantic_ai: wait_seconds must be from 0 to {_polling.MAX_WAIT_SECONDS}")
        if not (executing_timeout >= 0):
            raise ValueError("countersign_pydantic_ai: executing_timeout must be >= 0")
        self.client = client
        self.wait_seconds = wait_seconds
        self.executing_timeout = executing_timeout

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
        await self._io(self.client.require_agent)
        p: Optional[Proposal] = await self._io(lambda: self.client.find_call(call.thread_id, call.tool_call_id))
        if p is None:
            got = await self._answer(call, await self._submit(call, self.wait_seconds), handler, local)
            if not isinstance(got, _Pending):
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
                    raise ToolFailed(self._server_executed(call, p))
                note = None
                if call.approved:
                    note = "still pending: a resume does not approve; the approvers decide in Countersign, then resume again"
                raise ApprovalRequired(metadata={METADATA_KEY: self._request(call, p, note)})
            if p.status == "approved":
                got = await self._answer(call, await self._submit(call, 0), handler, local)
                if not isinstance(got, _Pending):
                    return got
                p = got.proposal
                continue
            if p.status == "executing":
                p = await self._io(lambda: self._await_holder(p))  # type: ignore[arg-type]
                if p.status == "executing":
                    raise ToolFailed(f"{call.name}: still executing under another holder's lease; its outcome is not known yet")
                continue
            return await self._settled(call, p, local)

    # -- answers --------------------------------------------------------------

    async def _answer(self, call: ToolCallRef, ans: CallResult, handler: Optional[Handler], local: bool) -> Any:
        s = ans.status
        if s == "execute":
            if not local or handler is None:
                return await self._not_ours(call, ans)
            return await self._run_claim(call, ans, handler)
        if s == "pending":
            p = ans.proposal or await self._io(lambda: self.client.proposal(ans.proposal_id or ""))
            return _Pending(p)
        if s == "executing":
            p = ans.proposal or await self._io(lambda: self.client.proposal(ans.proposal_id or ""))
            p = await self._io(lambda: self._await_holder(p))
            if p.status == "executing":
                raise ToolFailed(f"{call.name}: still executing under another holder's lease; its outcome is not known yet")
            if p.status == "approved":
                return _Pending(p)  # an idempotent action's lapsed lease: claim it again
            return await self._settled(call, p, local)
        if s == "denied":
            raise ToolFailed(f"{call.name} was denied ({ans.code}): {ans.reason}; it was not executed")
        if s in ("confirmation_required", "confirmation_invalid"):
            raise ToolFailed(f"{call.name}: the rule is two-phase ({s}), which this adapter does not drive; it was not executed")
        if ans.proposal is None:
            # A read action leaves no record: the server ran it.
            if local:
                raise ToolFailed(self._server_executed(call, None))
            if s != "succeeded":
                raise ToolFailed(f"{call.name}: {s}: {_content(ans.result) or ans.error or ''}")
            return ans.result
        return await self._settled(call, ans.proposal, local)

    async def _settled(self, call: ToolCallRef, p: Proposal, local: bool) -> Any:
        """A proposal that is past running: its recorded result, or why it never ran."""
        if p.status == "succeeded" and local and not await self._io(lambda: self._caller_claimed(p)):
            raise ToolFailed(self._server_executed(call, p))
        if p.status == "succeeded":
            return p.outcome.result if p.outcome is not None else None
        if p.status == "failed":
            raise ToolFailed(f"{call.name} failed: {p.why()}")
        if p.uncertain:
            raise ToolFailed(f"{call.name}: {p.why()}. Do not call it again: it may have been applied")
        raise ToolFailed(f"{call.name} was {p.why()}; it was not executed")

    async def _run_claim(self, call: ToolCallRef, claim: CallResult, handler: Handler) -> Any:
        """Runs the tool once under the claim's lease (countersign.lease):
        settled on success or NotApplied, left uncertain on anything else."""
        lease = self.client.lease(claim)
        run = lease.__enter__()
        token = _EXECUTION.set(run)
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
            _EXECUTION.reset(token)
        try:
            if err is None:
                run.succeeded(result=jsonable(out))
                await asyncio.to_thread(lease.__exit__, None, None, None)
                return out
            await asyncio.to_thread(lease.__exit__, type(err), err, err.__traceback__)
        except LeaseLost:
            raise ToolFailed(
                f"{call.name} ran, but its lease was lost before the outcome was recorded; Countersign reconciles it"
            ) from None
        if isinstance(err, NotApplied):
            raise ToolFailed(f"{call.name} failed: not applied: {err}") from None
        # Anything but NotApplied: the lease context settled nothing, and the
        # lease lapses; the server reconciles it or records it unknown.
        raise ToolFailed(
            f"{call.name}: the outcome is uncertain ({type(err).__name__}: {err}); nothing was recorded, and "
            "Countersign reconciles it. Do not call it again: it may have been applied"
        ) from None

    async def _not_ours(self, call: ToolCallRef, claim: CallResult) -> Any:
        """A claim this gate cannot run (no tool here): settled failed at
        once, which is certain, since nothing ran."""
        why = f"{call.action} is executed by its caller, and {call.name} has no tool here to run it: gate it with tools={{...}}"
        pid, token = claim.proposal_id or "", claim.lease.token if claim.lease else ""
        await self._io(lambda: self.client.settle(pid, token, "failed", error=why))
        raise ToolFailed(why)

    def _server_executed(self, call: ToolCallRef, p: Optional[Proposal]) -> str:
        return (
            f"{call.action} is executed by the server, not by this process, so {call.name} was not run here"
            + (f" (proposal {p.id}, {p.status})" if p is not None else "")
            + ": gate only actions configured execute: {by: caller}; offer a server-executed action with actions=[...]"
        )

    def _caller_claimed(self, p: Proposal) -> bool:
        """Whether a caller ran p: its audit trail shows a claim by
        ``caller:<requester>`` (a worker's or the server's own claim is not one)."""
        return claimed_by_caller(self._retry(lambda: self.client.proposal_events(p.id)))

    # -- requests -------------------------------------------------------------

    async def _submit(self, call: ToolCallRef, wait: float) -> CallResult:
        try:
            return await self._io(
                lambda: self.client.submit(call.thread_id, call.tool_call_id, call.action, call.args, wait_seconds=wait)
            )
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
        p = self._retry(lambda: self.client.find_call(thread_id, tool_call_id))
        if p is None or p.status != "pending":
            return p
        reason = message or "denied in the agent's run (DeferredToolResults)"
        res = self._retry(lambda: self.client.cancel(p.id, reason=reason))
        doc = res.get("proposal")
        return Proposal.from_json(doc) if doc else self._retry(lambda: self.client.proposal(p.id))

    def _await_holder(self, p: Proposal) -> Proposal:
        """Waits while another holder's lease runs (a concurrent resume, or
        an earlier attempt), at most executing_timeout."""
        return await_holder(self.client, p, self.executing_timeout)

    async def _io(self, fn: Callable[[], Any]) -> Any:
        """A blocking request of the client, off the event loop, retried."""
        return await asyncio.to_thread(self._retry, fn)

    def _retry(self, fn: Callable[[], Any]) -> Any:
        """fn, asked again on the client's schedule while the server answers
        429 or 5xx or cannot be reached; other errors are verdicts."""
        return _polling.retried(self.client.pacing, fn)

    # -- what the caller sees ---------------------------------------------------

    def _request(self, call: ToolCallRef, p: Proposal, note: Optional[str]) -> Dict[str, Any]:
        """DeferredToolRequests.metadata[tool_call_id]["countersign"]."""
        return {
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
        }


def _content(result: Any) -> str:
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    return json.dumps(result)
