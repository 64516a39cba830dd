"""countersign-pydantic-ai: Countersign inside Pydantic AI.

- ``Countersign(client, tools={"refund": "payments.refund"})``: a capability
  that gates the agent's tools: each call of one is a Countersign call of a
  caller-executed action; it runs here, once, under the execute lease.
- ``Countersign(client, actions=["payments.refund"])``: server-executed
  actions offered to the model as tools; the server runs them once approved.

While a human decides, the call is deferred with Pydantic AI's own
ApprovalRequired: the run ends with ``DeferredToolRequests`` whose
``metadata[tool_call_id]["countersign"]`` carries the proposal. The resume
is Pydantic AI's ``deferred_tool_results``; it never decides: the proposal
is read again, and the tool runs only if Countersign approved it. See
README.md.
"""

from countersign import LeaseLost, NotAnAgent, NotApplied, Running, Uncertain

from ._gate import METADATA_KEY, ResumeRefused, current_execution
from .capability import Countersign

__version__ = "0.1.1"

__all__ = [
    "Countersign",
    "ResumeRefused",
    "current_execution",
    "METADATA_KEY",
    "NotApplied",
    "Uncertain",
    "NotAnAgent",
    "LeaseLost",
    "Running",
]
