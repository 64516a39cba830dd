"""The one path every gated tool call takes: a Countersign call made by the
tool's ``needs_approval`` (the SDK's own pause), and on execution a fresh
read of the proposal; only an approved proposal is claimed, and only a
claim runs the tool, once, under the lease.

The SDK's approve and reject never decide. ``state.approve(item)`` lets the
SDK execute the tool, and the execution is where Countersign is asked: a
proposal still pending runs nothing (NotDecided), an approved one is
claimed and run once, any other answers the model with what Countersign
recorded. ``state.reject(item)`` of a proposal still pending cancels it
(the requester's withdrawal), the next time the SDK lists the tool.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, Mapping, MutableMapping, Optional, Set, Tuple, Union

from agents.exceptions import UserError

from countersign import CallResult, Client, Conflict, CountersignError, Invalid, LeaseLost, NotAnAgent, NotApplied, NotFound, Proposal, Running
from countersign.lease import CALLER_OWNER, _lease_seconds, await_holder
from countersign.toolgate import EXECUTION, Claim, Pending, ToolCall, ToolGate, current_execution, lease_lost, not_applied, uncertain

__all__ = [
    "CONTEXT_KEY",
    "CALLER_OWNER",
    "NotDecided",
    "ForgedResume",
    "current_execution",
    "proposal_id",
    "Gate",
    "ToolCallRef",
]

#: The run context's key (a mapping context) under which gated tools record
#: the proposal of each call: ``context["countersign"]["proposals"][call_id]``.
#: It is the only thing the adapter adds to a RunState: no lease token, no key.
CONTEXT_KEY = "countersign"

#: The lease owner the server records for a caller's claim (docs/state-machine.md).


class NotDecided(UserError):
    """The SDK was told to execute a gated call (``state.approve``) that
    Countersign holds no decision for: the proposal is still pending. Nothing
    ran and nothing was decided; resume again once the approvers decided.
    ``proposal`` is the proposal as it stands."""

    def __init__(self, message: str, proposal: Optional[Proposal]) -> None:
        super().__init__(message)
        self.proposal = proposal


class ForgedResume(UserError):
    """A resumed run names, for a tool call, a proposal that is not that
    call's (another call's, another thread's, an unknown id), or the call's
    arguments differ from the ones proposed. Nothing ran."""

    def __init__(self, message: str, proposal_id: Optional[str] = None) -> None:
        super().__init__(message)
        self.proposal_id = proposal_id


def _record_map(context: Any, create: bool) -> Optional[MutableMapping[str, Any]]:
    if not isinstance(context, MutableMapping):
        return None
    rec = context.get(CONTEXT_KEY)
    if not isinstance(rec, MutableMapping):
        if not create:
            return None
        rec = context[CONTEXT_KEY] = {}
    props = rec.get("proposals")
    if not isinstance(props, MutableMapping):
        if not create:
            return None
        props = rec["proposals"] = {}
    return props


def proposal_id(source: Any, item: Any) -> Optional[str]:
    """The proposal an interruption of a gated tool waits for, read from the
    run context the tool recorded it in: ``source`` is a RunResult, a
    RunState, a RunContextWrapper or the context mapping itself; ``item`` a
    ToolApprovalItem (or a call id). None when nothing was recorded (a
    context that is not a mapping: find it with client.find_call)."""
    ctx = source
    for attr in ("context_wrapper", "_context"):
        inner = getattr(ctx, attr, None)
        if inner is not None:
            ctx = inner
            break
    if not isinstance(ctx, Mapping):
        ctx = getattr(ctx, "context", None)
    call_id = item if isinstance(item, str) else _call_id_of(item)
    props = _record_map(ctx, False)
    if props is None or not call_id:
        return None
    pid = props.get(call_id)
    return pid if isinstance(pid, str) else None


def _call_id_of(item: Any) -> Optional[str]:
    raw = getattr(item, "raw_item", None)
    if isinstance(raw, Mapping):
        cid = raw.get("call_id")
    else:
        cid = getattr(raw, "call_id", None)
    return cid if isinstance(cid, str) else None


#: One tool call, as Countersign names it.
ToolCallRef = ToolCall


@dataclass
class _Claim:
    """A claim to run now."""

    answer: CallResult


@dataclass
class _Done:
    """What the model gets, the tool not run here."""

    value: Any


#: execute(run) runs the tool under the claim: (what the model gets, the
#: result to record). It raises what the tool raised.
Execute = Callable[[Running], Awaitable[Tuple[Any, Any]]]


class Gate(ToolGate):
    """Makes a tool call a Countersign call; see the module's comment and
    countersign.toolgate, which holds what every adapter's gate shares."""

    package = "countersign_openai_agents"

    def __init__(
        self,
        client: Client,
        *,
        wait_seconds: float = 0,
        executing_timeout: float = 120,
        local: bool = True,
    ) -> None:
        super().__init__(client, wait_seconds=wait_seconds, executing_timeout=executing_timeout, local=local)
        self._lock = threading.Lock()
        # Claims needs_approval received (an allowed or granted call's answer
        # is the claim), for the execution that follows it in this process.
        self._held: Dict[Tuple[str, str], Tuple[CallResult, threading.Timer]] = {}
        # Proposals this process withdrew after the SDK's reject.
        self._withdrawn: Set[str] = set()

    # -- needs_approval: the SDK's pause ---------------------------------------

    def needs_approval(self, call: ToolCallRef, context: Any) -> bool:
        """Whether the SDK must pause the run for this call: the Countersign
        call's answer. Pending: True (the run is interrupted, the proposal id
        recorded in the context). Anything else: False, and the execution
        that follows says what Countersign answered; an allowed or granted
        call's answer is the claim, held for that execution."""
        self._check(call)
        try:
            self.client.require_agent()
        except NotAnAgent as e:
            # A UserError, which the SDK lets through (it answers other
            # errors of needs_approval with a pause).
            raise UserError(f"{call.name}: {e}") from e
        try:
            ans = self.submit(call, self.wait_seconds)
        except Invalid:
            return False  # the execution asks again and tells the model why
        if ans.proposal_id:
            _record(context, call.tool_call_id, ans.proposal_id)
        if ans.status == "execute":
            self._hold(call, ans)
            return False
        if ans.status == "pending":
            # An independent proposal where a local tool was gated (the
            # server executes it): no pause, the execution says why it is
            # not run here.
            p = ans.proposal
            return not (self.local and p is not None and p.mode == "independent")
        return False

    def _hold(self, call: ToolCallRef, ans: CallResult) -> None:
        key = (call.thread_id, call.tool_call_id)
        # The SDK executes an allowed call right after asking. If it does not
        # (a tool input guardrail rejected it, the run was cancelled), the
        # tool certainly did not run: the claim is settled failed at half the
        # lease, before it lapses into an uncertain outcome.
        lease = ans.lease
        assert lease is not None
        updated = ans.proposal.updated_at if ans.proposal is not None else None
        timer = threading.Timer(_lease_seconds(lease.expires_at, updated) / 2, self._unclaimed, (key, ans, call))
        timer.daemon = True
        with self._lock:
            before = self._held.pop(key, None)
            self._held[key] = (ans, timer)
        if before is not None:
            before[1].cancel()
        timer.start()

    def _take(self, call: ToolCallRef) -> Optional[CallResult]:
        with self._lock:
            held = self._held.pop((call.thread_id, call.tool_call_id), None)
        if held is None:
            return None
        held[1].cancel()
        return held[0]

    def _unclaimed(self, key: Tuple[str, str], ans: CallResult, call: ToolCallRef) -> None:
        with self._lock:
            held = self._held.get(key)
            if held is None or held[0] is not ans:
                return
            del self._held[key]
        token = ans.lease.token if ans.lease else ""
        try:
            self.client.settle(ans.proposal_id or "", token, "failed", error=f"{call.name}: the agent did not execute the approved call")
        except (CountersignError, OSError):
            pass  # the lease lapses; the server's rules take over

    # -- the SDK's reject ----------------------------------------------------

    def withdraw_rejected(self, tool_name: str, wrapper: Any) -> None:
        """Cancels each proposal still pending whose call the SDK's approvals
        reject (``state.reject(item)``): the requester withdraws the call.
        A proposal already decided stays as it is: the reject never decides."""
        props = _record_map(getattr(wrapper, "context", None), False)
        if not props:
            return
        is_approved = getattr(wrapper, "is_tool_approved", None)
        if is_approved is None:
            return
        for call_id, pid in list(props.items()):
            if not isinstance(pid, str) or pid in self._withdrawn:
                continue
            try:
                verdict = is_approved(tool_name, call_id)
            except Exception:  # noqa: BLE001 - a call of another tool
                continue
            if verdict is not False:
                continue
            reason = "rejected in the agent's run (state.reject)"
            msg = getattr(wrapper, "get_rejection_message", None)
            if msg is not None:
                try:
                    text = msg(tool_name, call_id)
                except Exception:  # noqa: BLE001
                    text = None
                if isinstance(text, str) and text:
                    reason = text
            try:
                self.retry(lambda: self.client.cancel(pid, reason=reason))
            except CountersignError:
                pass  # not this agent's, or past deciding: the reject never decides
            with self._lock:
                self._withdrawn.add(pid)

    # -- execution -----------------------------------------------------------

    async def invoke(self, call: ToolCallRef, context: Any, execute: Optional[Execute]) -> Any:
        """What the model gets for the call: the tool's output when it ran
        here, else the recorded outcome or why it did not run. Raises
        NotDecided for a proposal still pending, ForgedResume for a resume
        that names another proposal, NotAnAgent for a credential that is
        not an agent's, and the client's errors for a request the server
        refused."""
        self._check(call)
        ans = self._take(call)
        if ans is None:
            step = await asyncio.to_thread(self._resolve, call, context, execute is not None)
            if isinstance(step, _Done):
                return step.value
            ans = step.answer
        if execute is None or not self.local:
            return (await asyncio.to_thread(self.unrunnable, call, ans)).text
        return await self._run_claim(call, ans, execute)

    def _resolve(self, call: ToolCallRef, context: Any, runnable: bool) -> Union[_Claim, _Done]:
        """The resume: the proposal read again; a claim only if approved."""
        self.client.require_agent()
        p = self._locate(call, context)
        if p is None:
            got = self._answer(call, self._submit_checked(call, self.wait_seconds), runnable)
            if not isinstance(got, Proposal):
                return got
            p = got
        while True:
            if p.status == "pending":
                if self.local and p.mode == "independent":
                    return _Done(self.server_executed(call, p).text)
                raise NotDecided(
                    f"{call.name}: not executed: proposal {p.id} is still pending in Countersign. "
                    "state.approve() records a decision Countersign holds, and it holds none yet: "
                    "resume once the approvers decided (state.reject() withdraws the call)",
                    p,
                )
            if p.status == "approved":
                if not self.local:
                    p = self._await_settled(p)
                    if p.status in ("approved", "executing"):
                        return _Done(f"{call.name}: approved, and still being executed by the server; its outcome is not known yet")
                    continue
                got = self._answer(call, self._submit_checked(call, 0), runnable)
                if not isinstance(got, Proposal):
                    return got
                p = got
                continue
            if p.status == "executing":
                p = self._await_settled(p)
                if p.status == "executing":
                    return _Done(f"{call.name}: still executing under another holder's lease; its outcome is not known yet")
                continue
            return _Done(self.settled(call, p).text)

    def _locate(self, call: ToolCallRef, context: Any) -> Optional[Proposal]:
        """The call's proposal: the one the run context names, checked to be
        this call's, else found by thread and tool call id (None: never called)."""
        props = _record_map(context, False)
        pid = props.get(call.tool_call_id) if props is not None else None
        if pid is None:
            return self.find(call)
        if not isinstance(pid, str) or not pid:
            raise ForgedResume(f"{call.name}: the run's state names no valid proposal for call {call.tool_call_id}; nothing was run")
        try:
            p: Proposal = self.read(pid)
        except NotFound:
            raise ForgedResume(
                f"{call.name}: the run's state names proposal {pid} for call {call.tool_call_id}, which this agent "
                "cannot see; nothing was run",
                pid,
            ) from None
        if (p.thread_id, p.tool_call_id, p.action) != (call.thread_id, call.tool_call_id, call.action):
            raise ForgedResume(
                f"{call.name}: the run's state names proposal {pid} for call {call.tool_call_id}, but that proposal is "
                f"{p.action}'s call {p.tool_call_id} in thread {p.thread_id}; nothing was run",
                pid,
            )
        return p

    def _submit_checked(self, call: ToolCallRef, wait: float) -> Any:
        """The call, made on resume: arguments that differ from the proposal's
        (CALL_MISMATCH) are a forged resume; invalid input is the model's to hear."""
        try:
            return self.submit(call, wait)
        except Conflict as e:
            if e.code == "CALL_MISMATCH":
                raise ForgedResume(
                    f"{call.name}: the call {call.tool_call_id} in the run's state has other arguments than the ones "
                    "proposed; nothing was run"
                ) from None
            raise
        except Invalid as e:
            detail = f" {json.dumps(e.details)}" if e.details else ""
            return _Done(f"{call.name}: invalid input ({e.code}): {e}{detail}; it was not executed")

    def _answer(self, call: ToolCallRef, ans: Any, runnable: bool) -> Union[_Claim, _Done, Proposal]:
        """A call's answer: a claim to run, what the model gets, or the
        proposal to look at again."""
        if isinstance(ans, _Done):
            return ans
        step = self.classify(call, ans, runnable=runnable)
        if isinstance(step, Claim):
            return _Claim(step.answer)
        if isinstance(step, Pending):
            return step.proposal
        return _Done(step.text)

    async def _run_claim(self, call: ToolCallRef, claim: CallResult, execute: Execute) -> Any:
        """Runs the tool once under the claim's lease (countersign.lease):
        settled on success or NotApplied, left uncertain on anything else."""
        lease = self.client.lease(claim)
        run = lease.__enter__()
        token = EXECUTION.set(run)
        try:
            output, result = await execute(run)
        except BaseException as e:  # noqa: BLE001 - each kind is answered below
            EXECUTION.reset(token)
            try:
                await asyncio.to_thread(lease.__exit__, type(e), e, e.__traceback__)
            except LeaseLost:
                pass
            if isinstance(e, NotApplied):
                return not_applied(call.name, e)
            if not isinstance(e, Exception):
                raise  # cancelled or exiting: nothing was settled, the lease lapses
            # Anything but NotApplied: nothing was settled, and the lease
            # lapses; the server reconciles it or records it unknown.
            return uncertain(call.name, e)
        EXECUTION.reset(token)
        run.succeeded(result=result)
        try:
            await asyncio.to_thread(lease.__exit__, None, None, None)
        except LeaseLost:
            return lease_lost(call.name)
        return output

    # -- requests -------------------------------------------------------------

    def _check(self, call: ToolCallRef) -> None:
        if not call.thread_id:
            raise UserError(f"{call.name}: no thread: pass thread= to gated(), or run with a context that has a thread_id")
        if not call.tool_call_id:
            raise UserError(f"{call.name}: no tool call id: a gated tool runs as the model's tool call")

    def _await_settled(self, p: Proposal) -> Proposal:
        """Waits while the proposal is approved or executing (another holder's
        lease, a concurrent resume, the server's worker), at most executing_timeout."""
        # An approved one, where this process runs the action: a lapsed
        # lease of an idempotent action, to be claimed again.
        return await_holder(
            self.client, p, self.executing_timeout,
            statuses=("executing", "approved"), done=lambda q: q.status == "approved" and self.local,
        )


def _record(context: Any, call_id: str, pid: str) -> None:
    props = _record_map(context, True)
    if props is not None:
        props[call_id] = pid
