"""What countersign-pydantic-ai's tests share beyond what every adapter's do
(testsupport/adapter_server.py: the server, the backend, the tools' side
effects): Pydantic AI's own FunctionModel playing a script (no network, no
key) and the agent.

Imported by the tests and by pai_child.py, the second process of the
cross-process tests; the child finds the backend through CS_PAI_BACKEND and
what its tools do through CS_PAI_MODE."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from adapter_server import Adapter
from countersign import Client
from countersign_pydantic_ai import Countersign, current_execution

#: This adapter's side of the harness: keys ck_pai_*, CS_PAI_BACKEND,
#: CS_PAI_MODE; payments.wire declares its input, for the tool the
#: capability makes of it.
PAI = Adapter("pai", current_execution, wire_input_schema=True)

#: The three tools: plain functions, which Pydantic AI takes as they are.
refund, hold, mail = PAI.tools()

#: The gated tools and their actions.
ACTIONS = {"refund": "payments.refund", "hold": "payments.hold", "mail": "mail.send"}


Call = Tuple[str, Dict[str, Any], str]


def script(calls: Sequence[Call]) -> FunctionModel:
    """Pydantic AI's FunctionModel answering from a script: the tool calls
    after each user prompt, then, once tools answered, "done". No network."""

    def respond(messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
        last_prompt = max(
            i for i, m in enumerate(messages) if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
        )
        answered = any(
            isinstance(m, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in m.parts) for m in messages[last_prompt + 1 :]
        )
        if answered:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(name, dict(args), tool_call_id=cid) for name, args, cid in calls])

    return FunctionModel(respond)


def agent(client: Client, calls: Sequence[Call], **options: Any) -> Agent[None, Any]:
    """An agent with the scripted model, the three tools and Countersign gating them."""
    return Agent(
        script(calls),
        tools=[refund, hold, mail],
        output_type=[str, DeferredToolRequests],
        capabilities=[Countersign(client, ACTIONS, **options)],
    )


def returns(messages: Sequence[ModelMessage]) -> Dict[str, Tuple[str, Any]]:
    """Each tool call's answer in the messages: {tool_call_id: (outcome, content)},
    the last one a call got."""
    out: Dict[str, Tuple[str, Any]] = {}
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, ToolReturnPart):
                    out[p.tool_call_id] = (p.outcome, p.content)
    return out

