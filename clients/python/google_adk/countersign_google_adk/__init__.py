"""countersign-google-adk: Countersign inside Google ADK.

- ``gated(func, client)``: a function tool whose every call is a
  Countersign call of a caller-executed action; it runs here, once, under
  the execute lease.
- ``action_tool(client, action)``: a server-executed Countersign action as
  a tool; the server runs it once approved.
- ``pending_confirmations(session)`` and ``confirm(session, answers)``:
  the tool confirmations a session waits on, each with its proposal, and
  the message that answers them, refusing an unknown or stale id.

A call that needs a human pauses with ADK's own tool confirmation
(``tool_context.request_confirmation``), whose payload carries the
proposal. The confirmation's answer never decides: the resumed tool reads
the proposal and runs only if Countersign approved it. See README.md.
"""

from countersign import LeaseLost, NotAnAgent, NotApplied, Running, Uncertain

from ._gate import PAYLOAD_KEY, current_execution
from .confirm import CONFIRMATION_CALL, ConfirmationRequest, UnknownConfirmation, confirm, pending_confirmations
from .tools import ActionTool, GatedTool, action_tool, gated, session_thread

__version__ = "0.1.1"

__all__ = [
    "gated",
    "action_tool",
    "GatedTool",
    "ActionTool",
    "session_thread",
    "confirm",
    "pending_confirmations",
    "ConfirmationRequest",
    "UnknownConfirmation",
    "CONFIRMATION_CALL",
    "PAYLOAD_KEY",
    "current_execution",
    "NotApplied",
    "Uncertain",
    "NotAnAgent",
    "LeaseLost",
    "Running",
]
