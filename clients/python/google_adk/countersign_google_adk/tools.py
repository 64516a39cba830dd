"""Tools: ``gated(func, client)`` for a function this process runs (a
caller-executed action), ``action_tool(client, action)`` for an action the
server executes. Both go through the one gate (_gate.Gate) and pause with
ADK's own tool confirmation (``tool_context.request_confirmation``) while
Countersign's approvers decide."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Dict, Optional, Tuple

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from countersign import Client, Running

from ._gate import PAYLOAD_KEY, Ask, Gate, ToolCallRef, Verdict, request_payload

__all__ = ["gated", "action_tool", "GatedTool", "ActionTool", "session_thread"]

#: Maps a tool call's context to its Countersign thread.
ThreadOf = Callable[[ToolContext], str]


def session_thread(tool_context: ToolContext) -> str:
    """The default thread of a tool call: the ADK session's id (one
    conversation, one Countersign thread, owned by the agent's credential)."""
    session = getattr(tool_context, "session", None) or tool_context._invocation_context.session
    return str(session.id or "")


def _confirmed(tool_context: ToolContext) -> Optional[bool]:
    """The answer ADK resumed this call with (None on a first run)."""
    conf = tool_context.tool_confirmation
    return None if conf is None else bool(conf.confirmed)


def _pause(tool_context: ToolContext, name: str, call: ToolCallRef, ask: Ask) -> Dict[str, Any]:
    """Asks ADK for a tool confirmation (its payload carries the proposal),
    and answers what the model hears meanwhile, as FunctionTool does."""
    p = ask.proposal
    hint = (
        f"{p.preview or name}: Countersign proposal {p.id} waits for {', '.join(p.approvers) or 'its approvers'}; "
        "answer once they decided (the answer does not approve)"
    )
    tool_context.request_confirmation(hint=hint, payload=request_payload(call, p))
    tool_context.actions.skip_summarization = True
    return {
        "error": f"{name} waits for a decision in Countersign (proposal {p.id}); it was not executed yet",
        PAYLOAD_KEY: {"proposal_id": p.id, "status": p.status},
    }


def _jsonable(v: Any) -> Any:
    """A function's return as JSON gives it back (what the server records
    and the model reads); what JSON cannot hold becomes its string."""
    return json.loads(json.dumps(v, default=str))


class GatedTool(FunctionTool):
    """A function tool whose every call is a Countersign call (see gated).

    It reuses FunctionTool's argument checks and invocation, which are
    private to ADK: the package requires google-adk 2.13.x for that reason
    (and because tool confirmation is experimental in ADK)."""

    def __init__(self, func: Callable[..., Any], gate: Gate, action: str, thread: ThreadOf) -> None:
        super().__init__(func)
        self.gate = gate
        self.action = action
        self.thread = thread

    async def run_async(self, *, args: Dict[str, Any], tool_context: ToolContext) -> Any:
        # The model's bad arguments never become a proposal: FunctionTool's
        # own checks answer them first, as they would for the plain function.
        preprocessed, errors = self._preprocess_args_with_validation(args)
        if errors:
            return self._build_validation_error_response(errors)
        to_call = self._prepare_invocation_args(preprocessed, tool_context)
        missing = [a for a in self._get_mandatory_args() if a not in to_call]
        if missing:
            return {"error": f"Invoking `{self.name}()` failed: missing mandatory parameters: {', '.join(missing)}"}

        call = ToolCallRef(self.thread(tool_context), tool_context.function_call_id or "", self.name, self.action, dict(args))
        loop = asyncio.get_running_loop()

        def execute(run: Running) -> Tuple[Any, Any]:
            # The function runs on ADK's loop; the gate waits for it here.
            out = asyncio.run_coroutine_threadsafe(self._invoke_callable(self.func, to_call), loop).result()
            out = _jsonable(out)
            return out, out

        verdict: Verdict = await asyncio.to_thread(self.gate.run, call, _confirmed(tool_context), execute)
        if isinstance(verdict, Ask):
            return _pause(tool_context, self.name, call, verdict)
        return verdict


def gated(
    func: Callable[..., Any],
    client: Client,
    *,
    action: Optional[str] = None,
    wait_seconds: float = 0,
    resume_wait_seconds: float = 60,
    executing_timeout: float = 120,
    thread: ThreadOf = session_thread,
) -> GatedTool:
    """``func`` as an ADK tool gated by Countersign: its declaration is
    FunctionTool's (name, docstring, parameters), and its every call is a
    Countersign call of the caller-executed action ``action`` (default: the
    function's name) in the session's thread, with ADK's function call id.

    Allowed by the policy (or a grant), the call's answer is the claim, and
    the function runs at once under the lease. Otherwise the tool requests
    ADK's tool confirmation, whose payload carries the proposal; when the run
    is resumed with the confirmation's answer, the proposal is read again,
    and only an approved one is claimed and run, once, however often,
    concurrently or wherever the session is resumed. ``confirmed: false`` of
    a pending proposal cancels it; ``confirmed: true`` decides nothing: of a
    proposal still pending, it waits up to ``resume_wait_seconds`` for the
    approvers, then ends the call unexecuted. ``client`` must hold an agent
    credential (GET /v1/me, kind agent).

    ``wait_seconds`` (0-60) is how long the first call lets the server hold
    it for a decision before asking for confirmation; ``executing_timeout``
    bounds the wait for another holder of the lease (a concurrent resume);
    ``thread`` maps a tool context to the Countersign thread (default: the
    session's id)."""
    if isinstance(func, BaseTool) or not callable(func):
        raise TypeError("gated: func must be a plain function (ADK makes its declaration from the signature and docstring)")
    gate = Gate(
        client, wait_seconds=wait_seconds, resume_wait_seconds=resume_wait_seconds, executing_timeout=executing_timeout, local=True
    )
    tool = GatedTool(func, gate, action or "", thread)
    tool.action = action or tool.name
    return tool


class ActionTool(BaseTool):
    """A server-executed Countersign action as an ADK tool (see action_tool)."""

    def __init__(self, name: str, description: str, schema: Dict[str, Any], gate: Gate, action: str, thread: ThreadOf) -> None:
        super().__init__(name=name, description=description)
        self.schema = schema
        self.gate = gate
        self.action = action
        self.thread = thread

    def _get_declaration(self) -> Optional[types.FunctionDeclaration]:
        return types.FunctionDeclaration(name=self.name, description=self.description, parameters_json_schema=self.schema)

    async def run_async(self, *, args: Dict[str, Any], tool_context: ToolContext) -> Any:
        call = ToolCallRef(self.thread(tool_context), tool_context.function_call_id or "", self.name, self.action, dict(args))
        verdict: Verdict = await asyncio.to_thread(self.gate.run, call, _confirmed(tool_context), None)
        if isinstance(verdict, Ask):
            return _pause(tool_context, self.name, call, verdict)
        return verdict


def action_tool(
    client: Client,
    action: str,
    *,
    name: Optional[str] = None,
    wait_seconds: float = 0,
    resume_wait_seconds: float = 60,
    executing_timeout: float = 120,
    thread: ThreadOf = session_thread,
) -> ActionTool:
    """An ADK tool for the Countersign action ``action`` that the server
    executes (a webhook action; the demo's ``payments.refund``), declared as
    the server lists it (GET /v1/actions: description, input schema). Its
    call is a Countersign call; the tool requests ADK's tool confirmation
    while a human decides, and on resume it reads the proposal: once the
    server has run it, the tool's response is the recorded outcome. Nothing
    runs in this process. ``name`` is the tool's name for the model (default
    the action's name with dots made underscores)."""
    gate = Gate(
        client, wait_seconds=wait_seconds, resume_wait_seconds=resume_wait_seconds, executing_timeout=executing_timeout, local=False
    )
    client.require_agent()
    spec = next((a for a in client.list_actions() if a.get("name") == action), None)
    if spec is None:
        raise LookupError(f"action_tool: {action} is not an action this credential may call (GET /v1/actions)")
    schema = spec.get("input_schema") or {"type": "object", "properties": {}}
    return ActionTool(name or action.replace(".", "_"), spec.get("description") or action, schema, gate, action, thread)
