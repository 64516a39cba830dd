"""countersign-openai-agents: Countersign inside the OpenAI Agents SDK.

- ``gated(tool, client)``: a function tool whose every call is a Countersign
  call of a caller-executed action; its ``needs_approval`` is that call (the
  policy and the grants decide whether the run pauses), and it runs here,
  once, under the execute lease.
- ``action_tool(client, action)``: a server-executed Countersign action as a
  tool; the server runs it once approved.
- ``proposal_id(result, item)``: the proposal an interruption waits for,
  recorded in the run context (the only thing the adapter adds to a
  RunState).

The run pauses with the SDK's own interruption; ``state.approve(item)`` is
only a record of a decision Countersign already holds: the resumed run reads
the proposal and runs the tool only if Countersign approved it;
``state.reject(item)`` of a pending proposal cancels it. See README.md.
"""

from countersign import LeaseLost, NotAnAgent, NotApplied, Running, Uncertain

from ._gate import CONTEXT_KEY, ForgedResume, NotDecided, current_execution, proposal_id
from .tools import Thread, action_tool, gated

__version__ = "0.1.1"

__all__ = [
    "gated",
    "action_tool",
    "proposal_id",
    "current_execution",
    "CONTEXT_KEY",
    "Thread",
    "NotDecided",
    "ForgedResume",
    "NotApplied",
    "Uncertain",
    "NotAnAgent",
    "LeaseLost",
    "Running",
]
