"""Tools: ``gated(tool)`` for a tool this process runs (a caller-executed
action), ``action_tool(client, action)`` for an action the server executes.
Both go through the one gate (_gate.Gate), inside any graph that runs them
with a ToolNode and a checkpointer."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, Optional, Tuple

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from countersign import Client, Running

from ._gate import Gate, ToolCallRef

__all__ = ["gated", "action_tool", "GatedTool", "ActionTool"]


def _tool_call(input: Any, name: str) -> Tuple[str, Dict[str, Any]]:
    """The model's tool call id and arguments of a ToolNode's invocation."""
    if isinstance(input, dict) and input.get("type") == "tool_call":
        return str(input.get("id") or ""), dict(input.get("args") or {})
    raise TypeError(f"{name}: invoke it with the model's tool call (a ToolNode does): a gated tool needs the tool call id")


def _thread(config: Optional[RunnableConfig]) -> str:
    conf = (config or {}).get("configurable") or {}
    t = conf.get("thread_id")
    return t if isinstance(t, str) else ""


def with_execution(config: Optional[RunnableConfig], run: Running) -> RunnableConfig:
    """config with the claim at configurable["countersign"], for the tool."""
    cfg: Dict[str, Any] = dict(config or {})
    cfg["configurable"] = {**(cfg.get("configurable") or {}), "countersign": run}
    return cfg  # type: ignore[return-value]


class GatedTool(BaseTool):
    """A tool whose every call is a Countersign call (see gated)."""

    inner: BaseTool
    gate: Any
    action: str

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is the entry
        raise TypeError(f"{self.name}: invoke it with the model's tool call (a ToolNode does)")

    def invoke(self, input: Any, config: Optional[RunnableConfig] = None, **kwargs: Any) -> Any:
        tool_call_id, args = _tool_call(input, self.name)
        call = ToolCallRef(_thread(config), tool_call_id, self.name, self.action, args, self.description)

        def execute(run: Running) -> Tuple[Any, Any]:
            out = self.inner.invoke(input, with_execution(config, run), **kwargs)
            return out, out.content if isinstance(out, ToolMessage) else out

        return self.gate.run(call, execute)

    async def ainvoke(self, input: Any, config: Optional[RunnableConfig] = None, **kwargs: Any) -> Any:
        # The gate's requests block: they run in a worker thread, which
        # carries this context (LangGraph's config, so interrupt() works);
        # the tool itself runs on this loop.
        loop = asyncio.get_running_loop()
        tool_call_id, args = _tool_call(input, self.name)
        call = ToolCallRef(_thread(config), tool_call_id, self.name, self.action, args, self.description)

        def execute(run: Running) -> Tuple[Any, Any]:
            fut = asyncio.run_coroutine_threadsafe(self.inner.ainvoke(input, with_execution(config, run), **kwargs), loop)
            out = fut.result()
            return out, out.content if isinstance(out, ToolMessage) else out

        return await asyncio.to_thread(self.gate.run, call, execute)


def gated(
    tool: BaseTool,
    client: Client,
    *,
    action: Optional[str] = None,
    wait_seconds: float = 0,
    executing_timeout: float = 120,
) -> GatedTool:
    """``tool``, gated by Countersign: a tool of the same name, description
    and arguments whose every call is a Countersign call of the
    caller-executed action ``action`` (default: the tool's name) in the
    graph's thread, with the model's tool call id.

    Allowed by the policy (or a grant), the call's answer is the claim, and
    the tool runs at once under the lease. Otherwise the graph pauses with
    interrupt(), whose value carries the proposal; on resume the proposal is
    read again, and only an approved one is claimed and run, once, however
    often, concurrently or wherever the graph is resumed. A resume of
    ``{"type": "reject"}`` cancels a pending proposal. ``client`` must hold
    an agent credential (GET /v1/me, kind agent).

    ``wait_seconds`` (0–60) is how long the first call lets the server hold
    it for a decision before pausing the graph; ``executing_timeout`` bounds
    the wait for another holder of the lease (a concurrent resume)."""
    if not isinstance(tool, BaseTool):
        raise TypeError("gated: tool must be a LangChain tool (BaseTool)")
    gate = Gate(client, wait_seconds=wait_seconds, executing_timeout=executing_timeout, local=True)
    return GatedTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        inner=tool,
        gate=gate,
        action=action or tool.name,
    )


class ActionTool(BaseTool):
    """A server-executed Countersign action as a tool (see action_tool)."""

    gate: Any
    action: str

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is the entry
        raise TypeError(f"{self.name}: invoke it with the model's tool call (a ToolNode does)")

    def invoke(self, input: Any, config: Optional[RunnableConfig] = None, **kwargs: Any) -> Any:
        tool_call_id, args = _tool_call(input, self.name)
        return self.gate.run(ToolCallRef(_thread(config), tool_call_id, self.name, self.action, args, self.description), None)

    async def ainvoke(self, input: Any, config: Optional[RunnableConfig] = None, **kwargs: Any) -> Any:
        tool_call_id, args = _tool_call(input, self.name)
        call = ToolCallRef(_thread(config), tool_call_id, self.name, self.action, args, self.description)
        return await asyncio.to_thread(self.gate.run, call, None)


def action_tool(
    client: Client,
    action: str,
    *,
    name: Optional[str] = None,
    wait_seconds: float = 0,
    executing_timeout: float = 120,
) -> ActionTool:
    """A tool for the Countersign action ``action`` that the server executes
    (a webhook action; the demo's ``payments.refund``), described as the
    server lists it (GET /v1/actions: description, input schema). Its call
    is a Countersign call; the graph pauses with interrupt() while a human
    decides, and on resume it reads the proposal: once the server has run
    it, the tool's result is the recorded outcome. Nothing runs in this
    process. ``name`` is the tool's name for the model (default the action's
    name with dots made underscores, which every model provider accepts)."""
    gate = Gate(client, wait_seconds=wait_seconds, executing_timeout=executing_timeout, local=False)
    client.require_agent()
    listed = client.list_actions()
    spec = next((a for a in listed if a.get("name") == action), None)
    if spec is None:
        raise LookupError(f"action_tool: {action} is not an action this credential may call (GET /v1/actions)")
    schema = spec.get("input_schema") or {"type": "object", "properties": {}}
    return ActionTool(
        name=name or action.replace(".", "_"),
        description=spec.get("description") or action,
        args_schema=schema,
        gate=gate,
        action=action,
    )
