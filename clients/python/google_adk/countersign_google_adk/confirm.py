"""The user's side of ADK's tool confirmation: which confirmations a session
waits on (each carrying its Countersign proposal), and the message that
answers them, refusing an id the session does not wait on.

ADK resumes a paused tool call when the next message of the session holds
a function response named ``adk_request_confirmation`` whose id is the
confirmation request's, with ``{"confirmed": true | false}``. Such an answer
is a request, never a decision (see countersign_google_adk._gate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from google.adk.sessions.session import Session
from google.genai import types

from ._gate import PAYLOAD_KEY

__all__ = ["CONFIRMATION_CALL", "ConfirmationRequest", "UnknownConfirmation", "pending_confirmations", "confirm"]

#: The name of the function call by which ADK asks for a tool confirmation
#: (google.adk's REQUEST_CONFIRMATION_FUNCTION_CALL_NAME).
CONFIRMATION_CALL = "adk_request_confirmation"


@dataclass(frozen=True)
class ConfirmationRequest:
    """One tool confirmation a session waits on."""

    #: The confirmation request's id: what an answer names.
    id: str
    #: The paused tool call's function call id.
    tool_call_id: str
    #: The paused tool's name and arguments.
    name: str
    args: Dict[str, Any]
    hint: str
    #: What Countersign said when it was asked (proposal_id, status,
    #: preview, approvers, expires_at, input_digest, proposal), or None for a
    #: confirmation some other tool asked for.
    countersign: Optional[Dict[str, Any]]


class UnknownConfirmation(LookupError):
    """An answer names a confirmation the session does not wait on:
    unknown, or whose call has a result since. ``unknown`` lists
    those ids, ``pending`` the ones that may be answered."""

    def __init__(self, message: str, unknown: List[str], pending: List[str]) -> None:
        super().__init__(message)
        self.unknown = unknown
        self.pending = pending


def pending_confirmations(session: Session) -> List[ConfirmationRequest]:
    """The tool confirmations ``session`` waits on, oldest first: requested,
    and the paused call has no result since (as ADK counts it: an answer
    that ADK refused, or whose run died, leaves it waiting). Read the
    session again (session_service.get_session) after each run: it is the
    list as of that copy."""
    events = list(session.events)
    out: List[ConfirmationRequest] = []
    for i, ev in enumerate(events):
        for fc in ev.get_function_calls():
            if fc.name != CONFIRMATION_CALL or not fc.id:
                continue
            args = fc.args or {}
            orig = args.get("originalFunctionCall") or {}
            original_id = str(orig.get("id") or "")
            if _has_result(events[i + 1 :], original_id):
                continue
            conf = args.get("toolConfirmation") or {}
            payload = conf.get("payload") if isinstance(conf, dict) else None
            cs = payload.get(PAYLOAD_KEY) if isinstance(payload, dict) else None
            out.append(
                ConfirmationRequest(
                    id=fc.id,
                    tool_call_id=original_id,
                    name=str(orig.get("name") or ""),
                    args=dict(orig.get("args") or {}),
                    hint=str(conf.get("hint") or "") if isinstance(conf, dict) else "",
                    countersign=cs if isinstance(cs, dict) else None,
                )
            )
    return out


def _has_result(events: List[Any], call_id: str) -> bool:
    """Whether a tool answered call_id in events: a function response of
    the agent's (not the user's) that is not the placeholder of a paused
    call (which comes with its confirmation request in the same actions)."""
    for ev in events:
        if ev.author == "user":
            continue
        asked = ev.actions.requested_tool_confirmations if ev.actions else {}
        for fr in ev.get_function_responses():
            if fr.id == call_id and call_id not in (asked or {}):
                return True
    return False


def confirm(session: Session, answers: Mapping[str, bool]) -> types.Content:
    """The message that answers ``answers`` (confirmation id → True or
    False) for ``session``, once each id is a confirmation the session waits
    on; UnknownConfirmation otherwise. Send it as the run's ``new_message``.

    The answers are requests: True asks the tool to look at its proposal
    again (it runs only if Countersign approved it), False withdraws a
    proposal still pending (a cancel). See the package's README."""
    pending = [r.id for r in pending_confirmations(session)]
    if not isinstance(answers, Mapping) or not answers:
        raise UnknownConfirmation("confirm: no confirmation answered (want {confirmation_id: True | False})", [], pending)
    unknown = sorted(k for k in answers if k not in pending)
    if unknown:
        raise UnknownConfirmation(
            f"confirm: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a confirmation this session waits on "
            f"(unknown, or its call has a result since); pending: {', '.join(pending) or 'none'}",
            unknown,
            pending,
        )
    bad = sorted(k for k, v in answers.items() if not isinstance(v, bool))
    if bad:
        raise TypeError(f"confirm: the answers for {', '.join(bad)} are not True or False")
    parts = [
        types.Part(function_response=types.FunctionResponse(id=cid, name=CONFIRMATION_CALL, response={"confirmed": ok}))
        for cid, ok in answers.items()
    ]
    return types.Content(role="user", parts=parts)
