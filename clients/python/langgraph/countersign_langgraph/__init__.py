"""countersign-langgraph: Countersign inside LangGraph.

- ``gated(tool, client)``: a tool whose every call is a Countersign call of a
  caller-executed action; it runs here, once, under the execute lease.
- ``action_tool(client, action)``: a server-executed Countersign action as a
  tool; the server runs it once approved.
- ``CountersignMiddleware(client, interrupt_on)``: langchain's
  HumanInTheLoopMiddleware (per call) for ``create_agent``, with Countersign
  deciding (needs the ``agents`` extra: langchain).
- ``resume(graph, config, answers)``: Command(resume=…) that refuses an
  unknown or stale interrupt id.

The graph pauses with LangGraph's interrupt(); the interrupt's value carries
the proposal. A resume never decides: it reads the proposal and runs the
tool only if Countersign approved it. See README.md.
"""

from typing import Any

from countersign import LeaseLost, NotAnAgent, NotApplied, Running, Uncertain

from ._gate import REQUEST_TYPE, Answer, ApproveAnswer, RejectAnswer, current_execution
from .resume import UnknownInterrupt, resume
from .tools import ActionTool, GatedTool, action_tool, gated

__version__ = "0.1.1"

__all__ = [
    "gated",
    "action_tool",
    "GatedTool",
    "ActionTool",
    "CountersignMiddleware",
    "resume",
    "UnknownInterrupt",
    "current_execution",
    "REQUEST_TYPE",
    "Answer",
    "ApproveAnswer",
    "RejectAnswer",
    "NotApplied",
    "Uncertain",
    "NotAnAgent",
    "LeaseLost",
    "Running",
]


def __getattr__(name: str) -> Any:
    # The middleware needs langchain (the agents extra); the rest does not.
    if name == "CountersignMiddleware":
        from .middleware import CountersignMiddleware

        return CountersignMiddleware
    raise AttributeError(f"module 'countersign_langgraph' has no attribute {name!r}")
