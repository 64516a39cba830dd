"""Countersign as a Pydantic AI capability: the tool guard
(``wrap_tool_execute``), the resume check (``before_node_run`` of the
CallToolsNode a DeferredToolResults resume starts with), and the
server-executed actions offered as tools."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from pydantic_core import SchemaValidator, core_schema

from countersign import Client

from pydantic_ai import CallToolsNode, RunContext, ToolApproved, ToolDenied
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from ._gate import Gate, ResumeRefused, ToolCallRef, jsonable, same_input

__all__ = ["Countersign"]

ThreadId = Union[str, Callable[[RunContext[Any]], str], None]

#: A server-executed action's arguments are checked by the server (its
#: input_schema); an invalid input goes back to the model as a retry.
_ANY_OBJECT = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))


class Countersign(AbstractCapability[Any]):
    """Countersign between an agent's tool calls and their side effects.

    ``Agent(model, tools=[refund], output_type=[str, DeferredToolRequests],
    capabilities=[Countersign(client, tools={"refund": "payments.refund"})])``

    - ``tools``: the agent's own tools to gate, by name, each with the
      caller-executed Countersign action it is (``execute: {by: caller}``).
      Every call of one is a Countersign call in the run's thread, with the
      model's tool call id: allowed (the policy, a grant), its answer is the
      claim and the tool runs at once under the lease; otherwise the call is
      deferred with Pydantic AI's ApprovalRequired, and the run ends with
      ``DeferredToolRequests`` whose ``metadata[tool_call_id]["countersign"]``
      carries the proposal. A tool not named here is not touched.
    - ``actions``: server-executed actions (webhook actions, the demo's
      ``payments.refund``) offered to the model as tools, described as the
      server lists them (GET /v1/actions), named with dots made underscores.
      Nothing runs in this process; a call's result is the recorded outcome.

    The resume is Pydantic AI's: ``agent.run(message_history=…,
    deferred_tool_results=DeferredToolResults(approvals={id: True}))``. It
    never decides: the guard reads the proposal, and only an approved one is
    claimed and run, once, however often, concurrently or wherever the run
    is resumed. ``ToolDenied`` (or ``False``) of a pending proposal cancels
    it. ``ToolApproved(override_args=…)`` is refused (ResumeRefused) unless
    those are the proposal's own arguments; so is a result supplied for a
    gated call.

    ``thread_id``: the Countersign thread (default: the run's
    ``conversation_id``, which a resume inherits from its message history);
    a string, or a function of the RunContext. ``client`` must hold an agent
    credential (GET /v1/me, kind agent). ``wait_seconds`` (0–60) lets a first
    call wait that long for a decision before deferring; ``executing_timeout``
    bounds the wait for another holder of the lease (a concurrent resume).
    """

    def __init__(
        self,
        client: Client,
        tools: Optional[Mapping[str, str]] = None,
        *,
        actions: Sequence[str] = (),
        thread_id: ThreadId = None,
        wait_seconds: float = 0,
        executing_timeout: float = 120,
    ) -> None:
        self.gate = Gate(client, wait_seconds=wait_seconds, executing_timeout=executing_timeout)
        self.client = client
        self.tools: Dict[str, str] = dict(tools or {})
        if isinstance(actions, str):
            actions = [actions]
        #: The server-executed actions' tools: tool name -> action.
        self.actions: Dict[str, str] = {a.replace(".", "_"): a for a in actions}
        clash = sorted(set(self.tools) & set(self.actions))
        if clash:
            raise ValueError(f"Countersign: {', '.join(clash)} named both as a tool and as a server-executed action")
        if thread_id is not None and not (isinstance(thread_id, str) and thread_id) and not callable(thread_id):
            raise TypeError("Countersign: thread_id must be a non-empty string or a function of the RunContext")
        self.thread_id = thread_id
        self._specs: Optional[List[Dict[str, Any]]] = None
        self._toolset = _ActionsToolset(self) if self.actions else None

    # AbstractCapability is a dataclass, whose generated __eq__ would call
    # any two of these equal (and make them unhashable): each is its own.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    @classmethod
    def get_serialization_name(cls) -> Optional[str]:
        return None  # it holds a client: not built from a spec

    def get_toolset(self) -> Any:
        return self._toolset

    # -- which calls are gated -------------------------------------------------

    def _gated(self, name: str) -> Optional[Tuple[str, bool]]:
        """(action, local) for a gated tool's name; None for any other tool."""
        if name in self.actions:
            return self.actions[name], False
        if name in self.tools:
            return self.tools[name], True
        return None

    def thread(self, ctx: RunContext[Any]) -> str:
        """The Countersign thread of a run."""
        t = self.thread_id
        if callable(t):
            t = t(ctx)
        if t is None:
            t = ctx.conversation_id
        if not isinstance(t, str) or not t:
            raise TypeError("Countersign: the run has no thread id (no conversation_id, and no thread_id given)")
        return t

    # -- the resume ---------------------------------------------------------------

    async def before_node_run(self, ctx: RunContext[Any], *, node: Any) -> Any:
        """A resume's DeferredToolResults, before any tool runs: a denial of
        a gated call cancels its pending proposal, then the guard answers
        with the proposal as it stands; override_args other than the
        proposal's, or a result supplied for a gated call, are refused."""
        if not isinstance(node, CallToolsNode):
            return node
        results = node.tool_call_results
        if not results:
            return node
        names = {c.tool_call_id: c.tool_name for c in node.model_response.tool_calls}
        for tcid, res in list(results.items()):
            name = names.get(tcid)
            gated = self._gated(name) if name is not None else None
            if gated is None or isinstance(res, str):  # not ours, or 'skip' (answered before)
                continue
            await asyncio.to_thread(self.client.require_agent)
            thread = self.thread(ctx)
            if isinstance(res, ToolDenied):
                p = await asyncio.to_thread(self.gate.cancel_pending, thread, tcid, res.message)
                if p is None:
                    # No proposal to withdraw (a call this thread never
                    # proposed): the denial stands as it is; nothing is
                    # proposed, nothing runs.
                    continue
                # The guard runs and reports the proposal as it now stands
                # (cancelled; or approved, when a decision came first).
                results[tcid] = ToolApproved()
            elif isinstance(res, ToolApproved):
                if res.override_args is None:
                    continue
                p = await asyncio.to_thread(self.gate.retry, lambda: self.client.find_call(thread, tcid))
                if p is None or not same_input(p.input, jsonable(res.override_args)):
                    raise ResumeRefused(
                        tcid,
                        f"{name}: ToolApproved(override_args=…) asks to run arguments Countersign did not approve"
                        + (f" (proposal {p.id} holds {jsonable(p.input)})" if p is not None else " (no proposal has them)")
                        + "; nothing was run",
                    )
            else:
                raise ResumeRefused(
                    tcid,
                    f"{name}: a result was supplied for a gated call ({type(res).__name__}); its result is what runs "
                    "under its Countersign lease, so nothing was run",
                )
        return node

    # -- the guard ----------------------------------------------------------------

    async def wrap_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, handler: Any
    ) -> Any:
        gated = self._gated(tool_def.name)
        if gated is None:
            return await handler(args)
        action, local = gated
        ref = ToolCallRef(
            self.thread(ctx), call.tool_call_id, tool_def.name, action, jsonable(args), bool(ctx.tool_call_approved), args
        )
        return await self.gate.run(ref, handler if local else None, local=local)

    # -- server-executed actions ----------------------------------------------------

    async def _action_specs(self) -> List[Dict[str, Any]]:
        """GET /v1/actions once: the server's description of each action."""
        if self._specs is None:
            await asyncio.to_thread(self.client.require_agent)
            listed = await asyncio.to_thread(self.gate.retry, self.client.list_actions)
            by_name = {a.get("name"): a for a in listed}
            missing = [a for a in self.actions.values() if a not in by_name]
            if missing:
                raise LookupError(f"Countersign: {', '.join(missing)} is not an action this credential may call (GET /v1/actions)")
            self._specs = [by_name[a] for a in self.actions.values()]
        return self._specs


class _ActionsToolset(AbstractToolset[Any]):
    """The server-executed actions as tools; their calls go through the
    guard (Countersign.wrap_tool_execute), which never calls call_tool."""

    def __init__(self, cap: Countersign) -> None:
        self.cap = cap

    @property
    def id(self) -> Optional[str]:
        return "countersign-actions"

    async def get_tools(self, ctx: RunContext[Any]) -> Dict[str, ToolsetTool[Any]]:
        out: Dict[str, ToolsetTool[Any]] = {}
        for spec in await self.cap._action_specs():
            name = str(spec["name"]).replace(".", "_")
            schema = spec.get("input_schema") or {"type": "object", "properties": {}}
            out[name] = ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(name=name, description=spec.get("description") or spec["name"], parameters_json_schema=schema),
                max_retries=1,
                args_validator=_ANY_OBJECT,
            )
        return out

    async def call_tool(self, name: str, tool_args: Dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]) -> Any:
        raise RuntimeError(f"{name}: a server-executed Countersign action runs only through the Countersign capability")
