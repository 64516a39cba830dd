"""What countersign-langgraph's tests share beyond what every adapter's do
(testsupport/adapter_server.py: the server, the backend, the tools' side
effects): the tools as LangChain tools, a scripted chat model (no network,
no key), the agent, and a graph of one's own with a ToolNode.

Imported by the tests and by lg_child.py, the second process of the
cross-process tests; the child finds the backend through CS_LG_BACKEND and
what its tool does through CS_LG_MODE."""

from __future__ import annotations

import sqlite3
from typing import Any, Dict, List, Optional, Sequence

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from adapter_server import Adapter
from countersign import Client
from countersign_langgraph import CountersignMiddleware, current_execution

#: This adapter's side of the harness: keys ck_lg_*, CS_LG_BACKEND, CS_LG_MODE.
LG = Adapter("lg", current_execution)

#: The three tools, as LangChain tools.
refund, hold, mail = (tool(f) for f in LG.tools())


class ScriptedModel(BaseChatModel):
    """A chat model that answers from a script: its tool calls until a tool
    answered, then "done". No network."""

    calls: List[Dict[str, Any]]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        # The turn after the last human message: tool calls, unless tools answered.
        last_human = max(i for i, m in enumerate(messages) if m.type == "human")
        answered = any(isinstance(m, ToolMessage) for m in messages[last_human:])
        msg = AIMessage(content="done") if answered else AIMessage(content="", tool_calls=self.calls)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def call(name: str, args: Dict[str, Any], cid: str) -> Dict[str, Any]:
    return {"name": name, "args": args, "id": cid, "type": "tool_call"}


def agent(
    client: Client,
    calls: Sequence[Dict[str, Any]],
    checkpointer: Any = None,
    interrupt_on: Optional[Dict[str, Any]] = None,
) -> Any:
    """create_agent with the scripted model, the tools and CountersignMiddleware."""
    mw = CountersignMiddleware(
        client,
        interrupt_on if interrupt_on is not None else {"refund": True, "hold": True, "mail": True},
        actions={"refund": "payments.refund", "hold": "payments.hold", "mail": "mail.send"},
    )
    return create_agent(
        ScriptedModel(calls=list(calls)),
        tools=[refund, hold, mail],
        middleware=[mw],
        checkpointer=checkpointer if checkpointer is not None else InMemorySaver(),
    )


def tool_graph(tools: Sequence[Any], calls: Sequence[Dict[str, Any]], checkpointer: Any = None) -> Any:
    """A graph of one's own: a node that makes the tool calls (then says
    "done" once they answered) and a ToolNode with the tools."""

    def model(state: MessagesState) -> Dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [AIMessage(content="", tool_calls=list(calls))]}

    return (
        StateGraph(MessagesState)
        .add_node("model", model)
        .add_node("tools", ToolNode(list(tools)))
        .add_edge(START, "model")
        .add_conditional_edges("model", tools_condition, ["tools", END])
        .add_edge("tools", "model")
        .compile(checkpointer=checkpointer if checkpointer is not None else InMemorySaver())
    )


def sqlite_saver(path: str) -> SqliteSaver:
    """LangGraph's SQLite checkpointer on a file: two processes share it."""
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False, timeout=30))


def tool_messages(state: Dict[str, Any]) -> List[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]

