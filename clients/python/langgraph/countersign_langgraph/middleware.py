"""CountersignMiddleware: langchain's HumanInTheLoopMiddleware, per call,
with Countersign deciding.

It takes HumanInTheLoopMiddleware's configuration (``interrupt_on``: tool
name → True or ``{"allowed_decisions", "description", "when"}``), pauses the
way its ``interrupt_mode="per_call"`` does (one interrupt per gated tool
call, its value a ToolApprovalRequest: ``type: "tool_approval"``,
``tool_call_id``, ``name``, ``args``, ``description``), and is resumed the
same way: ``Command(resume={interrupt_id: {"type": "approve"} | {"type":
"reject", "message": …}})``. What differs is who decides: the interrupt's
value carries the Countersign proposal (``value["countersign"]``), the
approvers decide it in Countersign, and the resume is only a request (see
countersign_langgraph._gate). ``edit`` and ``respond`` are refused: an
edit would run a call nobody approved, and a respond would answer for a
tool whose call Countersign holds.

Needs langchain 1.x (``pip install countersign-langgraph[agents]``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Tuple, Union

from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.agents.middleware.human_in_the_loop import InterruptOnConfig
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import get_runtime
from langgraph.types import Command

from countersign import Client, Running

from ._gate import Gate, ToolCallRef
from .tools import with_execution

__all__ = ["CountersignMiddleware"]

_ALLOWED = ("approve", "reject")


class _UnderLease(BaseTool):
    """The request's tool, run under the claim: it hands the tool the claim
    (config and current_execution) and keeps what it raised, which the
    ToolNode may turn into an error message, so that the gate can still
    tell NotApplied (settled failed) from an uncertain failure."""

    inner: BaseTool
    claim: Any
    raised: Dict[str, BaseException]

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is the entry
        raise TypeError("invoke only")

    def invoke(self, input: Any, config: Optional[RunnableConfig] = None, **kwargs: Any) -> Any:
        try:
            return self.inner.invoke(input, with_execution(config, self.claim), **kwargs)
        except BaseException as e:
            self.raised["error"] = e
            raise

    async def ainvoke(self, input: Any, config: Optional[RunnableConfig] = None, **kwargs: Any) -> Any:
        try:
            return await self.inner.ainvoke(input, with_execution(config, self.claim), **kwargs)
        except BaseException as e:
            self.raised["error"] = e
            raise


def _result(out: Any) -> Any:
    """What to record of the tool's answer: a message's content."""
    if isinstance(out, ToolMessage):
        return out.content
    return None


class CountersignMiddleware(HumanInTheLoopMiddleware):  # type: ignore[type-arg]
    """See the module's comment. ``actions`` maps a tool's name to its
    Countersign action (default: the tool's name); ``client`` holds an agent
    credential (checked with GET /v1/me on the first gated call)."""

    def __init__(
        self,
        client: Client,
        interrupt_on: Mapping[str, Union[bool, InterruptOnConfig]],
        *,
        actions: Optional[Mapping[str, str]] = None,
        description_prefix: str = "Tool execution requires approval",
        wait_seconds: float = 0,
        executing_timeout: float = 120,
    ) -> None:
        resolved: Dict[str, Any] = {}
        for name, cfg in interrupt_on.items():
            if cfg is True:
                resolved[name] = {"allowed_decisions": list(_ALLOWED)}
            elif cfg is False:
                resolved[name] = False
            else:
                bad = [d for d in cfg.get("allowed_decisions") or [] if d not in _ALLOWED]
                if bad:
                    raise ValueError(
                        f"CountersignMiddleware: {name}: allowed_decisions {bad} are not offered: Countersign's approvers "
                        "decide the call as the model made it, so an edit would run a call nobody approved and a respond "
                        "would answer for a call Countersign holds; allow approve and reject"
                    )
                resolved[name] = cfg
        super().__init__(interrupt_on=resolved, description_prefix=description_prefix, edit_notice=None, interrupt_mode="per_call")
        self.gate = Gate(client, wait_seconds=wait_seconds, executing_timeout=executing_timeout, local=True)
        self.actions = dict(actions or {})

    def _gated(self, request: ToolCallRequest) -> Optional[ToolCallRef]:
        """The Countersign call of a request, or None for a tool that is not gated."""
        tool_call = request.tool_call
        config = self.interrupt_on.get(tool_call["name"])
        if config is None:
            return None
        when = config.get("when")
        if when is not None and not when(request):
            return None
        action_request, _ = self._create_action_and_config(tool_call, config, request.state, get_runtime())
        conf = (request.runtime.config or {}).get("configurable") or {}
        thread = conf.get("thread_id")
        return ToolCallRef(
            thread_id=thread if isinstance(thread, str) else "",
            tool_call_id=str(tool_call.get("id") or ""),
            name=tool_call["name"],
            action=self.actions.get(tool_call["name"], tool_call["name"]),
            args=tool_call["args"],
            description=action_request.get("description", ""),
        )

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Union[ToolMessage, Command[Any]]],
    ) -> Union[ToolMessage, Command[Any]]:
        call = self._gated(request)
        if call is None:
            return handler(request)

        def execute(run: Running) -> Tuple[Any, Any]:
            raised: Dict[str, BaseException] = {}
            out = handler(request.override(tool=_UnderLease.of(request.tool, run, raised)))
            if "error" in raised:
                raise raised["error"]
            return out, _result(out)

        result: Union[ToolMessage, Command[Any]] = self.gate.run(call, execute)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[Union[ToolMessage, Command[Any]]]],
    ) -> Union[ToolMessage, Command[Any]]:
        call = self._gated(request)
        if call is None:
            return await handler(request)
        loop = asyncio.get_running_loop()

        def execute(run: Running) -> Tuple[Any, Any]:
            raised: Dict[str, BaseException] = {}
            req = request.override(tool=_UnderLease.of(request.tool, run, raised))
            out = asyncio.run_coroutine_threadsafe(handler(req), loop).result()  # type: ignore[arg-type]
            if "error" in raised:
                raise raised["error"]
            return out, _result(out)

        # The gate's requests block: a worker thread, carrying this context.
        result: Union[ToolMessage, Command[Any]] = await asyncio.to_thread(self.gate.run, call, execute)
        return result


def _of(inner: Optional[BaseTool], claim: Running, raised: Dict[str, BaseException]) -> Any:
    if inner is None:
        raise TypeError("CountersignMiddleware: the tool call names no registered tool")
    return _UnderLease(name=inner.name, description=inner.description, args_schema=inner.args_schema, inner=inner, claim=claim, raised=raised)


_UnderLease.of = staticmethod(_of)  # type: ignore[attr-defined]
