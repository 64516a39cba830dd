"""What countersign-openai-agents' tests share beyond what every adapter's
do (testsupport/adapter_server.py: the server, the backend, the tools' side
effects): the tools as function tools, the SDK's own scripted model
(agents.testing.ScriptedModel: no network, no key) and the agent.

Imported by the tests and by oa_child.py, the second process of the
cross-process tests; the child finds the backend through CS_OA_BACKEND and
what its tool does through CS_OA_MODE."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from agents import Agent, ToolCallOutputItem, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from adapter_server import Adapter
from countersign import Client
from countersign_openai_agents import current_execution, gated

# No network: the SDK's traces go nowhere.
set_tracing_disabled(True)

#: This adapter's side of the harness: keys ck_oa_*, CS_OA_BACKEND, CS_OA_MODE.
OA = Adapter("oa", current_execution)

#: The three tools, as the SDK's function tools.
refund, hold, mail = (function_tool(f) for f in OA.tools())


def call(name: str, args: Dict[str, Any], cid: str) -> Any:
    """One tool call the scripted model makes."""
    return function_call(name, args, call_id=cid)


def model(calls: Sequence[Any]) -> ScriptedModel:
    """The SDK's ScriptedModel: each turn makes ``calls``, unless tools have
    answered since the last user message, then it says "done" with their
    outputs. Enough steps for a run and several resumes of it."""

    def respond(mc: Any) -> Any:
        items = mc.input if isinstance(mc.input, list) else []
        last_user = max((i for i, it in enumerate(items) if _get(it, "role") == "user"), default=-1)
        outputs = [str(_get(it, "output")) for it in items[last_user + 1 :] if _get(it, "type") == "function_call_output"]
        if outputs:
            return [assistant_message("done: " + " | ".join(outputs))]
        return list(calls)

    return ScriptedModel([ModelStep.respond(respond) for _ in range(16)])


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def tools(client: Client) -> List[Any]:
    return [
        gated(refund, client, action="payments.refund"),
        gated(hold, client, action="payments.hold"),
        gated(mail, client, action="mail.send"),
    ]


def agent(client: Client, calls: Sequence[Any]) -> Agent:
    """The agent: the scripted model and the gated tools."""
    return Agent(name="support", instructions="Refund what is asked.", model=model(calls), tools=tools(client))


def outputs(result: Any) -> List[str]:
    """The tool outputs of a run's new items, in order."""
    return [str(i.output) for i in result.new_items if isinstance(i, ToolCallOutputItem)]

