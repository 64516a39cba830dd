"""resume(): Command(resume=…) for a graph paused by Countersign, after
checking that every id it answers is an interrupt the thread is paused at.

LangGraph takes an id-keyed map as it comes: an id no interrupt has is
ignored (the graph pauses again, nothing said), and a task that asked a
second question also takes an answer to its first one's id. Answering
through resume() refuses both before anything runs, naming the ids."""

from __future__ import annotations

from typing import Any, List, Mapping

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

__all__ = ["resume", "UnknownInterrupt"]


class UnknownInterrupt(LookupError):
    """A resume names an interrupt the thread is not paused at: unknown,
    already answered, or asked again since (stale). ``unknown`` lists those
    ids, ``pending`` the ones that may be answered."""

    def __init__(self, message: str, unknown: List[str], pending: List[str]) -> None:
        super().__init__(message)
        self.unknown = unknown
        self.pending = pending


def resume(graph: Any, config: RunnableConfig, answers: Mapping[str, Any]) -> Command[Any]:
    """The Command that answers ``answers`` (interrupt id → ``{"type":
    "approve"}`` or ``{"type": "reject", "message": …}``) for the thread of
    ``config``, once each id is one of the interrupts ``graph`` is paused at
    there; UnknownInterrupt otherwise. The answers are requests: see
    countersign_langgraph's README."""
    if not isinstance(answers, Mapping) or not answers:
        raise UnknownInterrupt("resume: no interrupt answered (want {interrupt_id: answer})", [], _pending(graph, config))
    pending = _pending(graph, config)
    unknown = sorted(k for k in answers if k not in pending)
    if unknown:
        raise UnknownInterrupt(
            f"resume: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not an interrupt this thread is paused at "
            f"(unknown, already answered, or asked again since); pending: {', '.join(pending) or 'none'}",
            unknown,
            pending,
        )
    return Command(resume=dict(answers))


def _pending(graph: Any, config: RunnableConfig) -> List[str]:
    state = graph.get_state(config)
    return sorted(i.id for i in state.interrupts)
