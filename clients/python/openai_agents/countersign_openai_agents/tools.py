"""Tools: ``gated(tool, client)`` for a function tool this process runs (a
caller-executed action), ``action_tool(client, action)`` for an action the
server executes. Both are FunctionTools whose ``needs_approval`` is the
Countersign call and whose execution goes through the one gate
(_gate.Gate)."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
from typing import Any, Callable, Mapping, Optional, Tuple, Union

from agents.tool import FunctionTool, function_tool, set_function_tool_failure_error_function

from countersign import Client, Running

from ._gate import Gate, ToolCallRef

__all__ = ["gated", "action_tool", "Thread"]

#: Where a gated tool's calls belong in Countersign: a thread id, or a
#: function of the run context wrapper that answers it.
Thread = Union[str, Callable[[Any], Optional[str]], None]


def _thread_of(thread: Thread, wrapper: Any) -> str:
    """The Countersign thread of a call: ``thread``, else the run context's
    ``thread_id`` (a mapping's key or an attribute)."""
    if callable(thread):
        t = thread(wrapper)
    elif thread is not None:
        t = thread
    else:
        ctx = getattr(wrapper, "context", None)
        t = ctx.get("thread_id") if isinstance(ctx, Mapping) else getattr(ctx, "thread_id", None)
    return t if isinstance(t, str) else ""


def _recorded(out: Any) -> Any:
    """What to record of the tool's output: JSON as it is, a model as its
    JSON, anything else as its text."""
    if out is None or isinstance(out, (str, int, float, bool)):
        return out
    dump = getattr(out, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    try:
        return json.loads(json.dumps(out))
    except (TypeError, ValueError):
        return str(out)


def _args(input_json: str) -> Any:
    try:
        return json.loads(input_json) if input_json else {}
    except ValueError:
        return None


def _wire(tool: FunctionTool, gate: Gate, action: str, thread: Thread, inner: Optional[FunctionTool]) -> FunctionTool:
    """tool with the gate as its needs_approval, its execution and its is_enabled."""
    base_enabled = tool.is_enabled
    name = tool.name

    def ref(wrapper: Any, args: Any, call_id: Optional[str]) -> ToolCallRef:
        return ToolCallRef(_thread_of(thread, wrapper), call_id or "", name, action, args)

    async def needs_approval(wrapper: Any, params: Any, call_id: str) -> bool:
        # The gate's requests block: a worker thread.
        return await asyncio.to_thread(gate.needs_approval, ref(wrapper, params, call_id), getattr(wrapper, "context", None))

    async def on_invoke_tool(ctx: Any, input_json: str) -> Any:
        args = _args(input_json)
        if args is None:
            return f"{name}: the arguments are not JSON; it was not executed"
        call = ref(ctx, args, getattr(ctx, "tool_call_id", None))
        execute = None
        if inner is not None:
            run_inner = inner

            async def execute(run: Running) -> Tuple[Any, Any]:
                out = await run_inner.on_invoke_tool(ctx, input_json)
                return out, _recorded(out)

        return await gate.invoke(call, getattr(ctx, "context", None), execute)

    async def is_enabled(wrapper: Any, agent: Any) -> bool:
        # The SDK lists the tools on every turn, a resumed one included:
        # where its approvals reject a call whose proposal is still pending,
        # the proposal is cancelled (the requester's withdrawal).
        await asyncio.to_thread(gate.withdraw_rejected, name, wrapper)
        if callable(base_enabled):
            got = base_enabled(wrapper, agent)
            if inspect.isawaitable(got):
                got = await got
            return bool(got)
        return bool(base_enabled)

    out = copy.copy(tool)
    out.on_invoke_tool = on_invoke_tool
    out.needs_approval = needs_approval
    out.is_enabled = is_enabled
    # The gate's own errors (NotDecided, ForgedResume, an unreachable
    # server) fail the run rather than reach the model as "try again".
    set_function_tool_failure_error_function(out, None)
    return out


def gated(
    tool: Union[FunctionTool, Callable[..., Any]],
    client: Client,
    *,
    action: Optional[str] = None,
    thread: Thread = None,
    wait_seconds: float = 0,
    executing_timeout: float = 120,
) -> FunctionTool:
    """``tool`` (a FunctionTool, or a function that ``function_tool`` takes),
    gated by Countersign: a FunctionTool of the same name, description and
    parameters whose every call is a Countersign call of the caller-executed
    action ``action`` (default: the tool's name) in the run's thread
    (``thread``, default the run context's ``thread_id``), with the model's
    call id.

    ``needs_approval`` is that call: allowed by the policy (or a grant), its
    answer is the claim, the run does not pause, and the tool runs at once
    under the lease. Otherwise the SDK interrupts the run, and the run
    context records the proposal id (``proposal_id(result, item)``). On
    resume (``state.approve(item)``) the proposal is read again: approved,
    it is claimed and the tool runs, once, however often, concurrently or
    wherever the state is resumed; still pending, nothing runs (NotDecided);
    otherwise the model hears what Countersign recorded. ``state.reject``
    of a pending proposal cancels it. ``client`` must hold an agent
    credential (GET /v1/me, kind agent).

    ``wait_seconds`` (0-60) is how long the first call lets the server hold
    it for a decision before the run pauses; ``executing_timeout`` bounds
    the wait for another holder of the lease (a concurrent resume)."""
    if not isinstance(tool, FunctionTool):
        if not callable(tool):
            raise TypeError("gated: tool must be a FunctionTool or a function")
        tool = function_tool(tool)
    if tool.needs_approval is not False:
        raise TypeError(f"gated: {tool.name} has a needs_approval of its own: Countersign's policy decides which calls need approval")
    gate = Gate(client, wait_seconds=wait_seconds, executing_timeout=executing_timeout, local=True)
    # The tool as it was, with its failures raised: NotApplied must reach the
    # gate (settled failed), and so must any other error (left uncertain),
    # rather than become the SDK's "an error occurred" text, which the gate
    # would record as a success.
    inner = copy.copy(tool)
    set_function_tool_failure_error_function(inner, None)
    return _wire(tool, gate, action or tool.name, thread, inner)


def action_tool(
    client: Client,
    action: str,
    *,
    name: Optional[str] = None,
    thread: Thread = None,
    wait_seconds: float = 0,
    executing_timeout: float = 120,
) -> FunctionTool:
    """A tool for the Countersign action ``action`` that the server executes
    (a webhook action; the demo's ``payments.refund``), described as the
    server lists it (GET /v1/actions: description, input schema). Its
    ``needs_approval`` is the Countersign call; the run pauses while a human
    decides, and on resume it reads the proposal: once the server has run
    it, the tool's output is the recorded outcome. Nothing runs in this
    process. ``name`` is the tool's name for the model (default the action's
    name with dots made underscores, which every model provider accepts)."""
    gate = Gate(client, wait_seconds=wait_seconds, executing_timeout=executing_timeout, local=False)
    client.require_agent()
    spec = next((a for a in client.list_actions() if a.get("name") == action), None)
    if spec is None:
        raise LookupError(f"action_tool: {action} is not an action this credential may call (GET /v1/actions)")
    schema = spec.get("input_schema") or {"type": "object", "properties": {}}

    async def unused(ctx: Any, input_json: str) -> Any:  # pragma: no cover - replaced by _wire
        raise TypeError("action_tool: not wired")

    tool = FunctionTool(
        name=name or action.replace(".", "_"),
        description=spec.get("description") or action,
        params_json_schema=schema,
        on_invoke_tool=unused,
        # The server's schema is checked by the server (INVALID_INPUT); the
        # SDK's strict mode would rewrite it.
        strict_json_schema=False,
    )
    return _wire(tool, gate, action, thread, None)
