"""What countersign-google-adk's tests share beyond what every adapter's do
(testsupport/adapter_server.py: the server, the backend, the tools' side
effects): a scripted model (ADK's own BaseLlm; no network, no key), the
agent with its runner, and its sessions.

Imported by the tests and by adk_child.py, the second process of the
cross-process tests; the child finds the backend through CS_ADK_BACKEND and
what its tool does through CS_ADK_MODE. Both processes share the session
through ADK's SqliteSessionService on one file."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncGenerator, Dict, List, Optional, Sequence

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, InMemorySessionService
from google.genai import types

from adapter_server import Adapter
from countersign import Client
from countersign_google_adk import CONFIRMATION_CALL, current_execution, gated

APP = "countersign-adk-tests"
USER = "u1"

#: This adapter's side of the harness: keys ck_adk_*, CS_ADK_BACKEND, CS_ADK_MODE.
ADK = Adapter("adk", current_execution)

#: The three tools: plain functions, which gated() takes as they are.
refund, hold, mail = ADK.tools()


def call(name: str, args: Dict[str, Any], cid: str) -> Dict[str, Any]:
    return {"name": name, "args": args, "id": cid}


class ScriptedModel(BaseLlm):
    """ADK's model interface answering from a script: its function calls
    until the tools answered after the last user text, then a text naming
    each tool's response. No network."""

    calls: List[Dict[str, Any]] = []

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        contents = list(llm_request.contents or [])
        last_text = max((i for i, c in enumerate(contents) if c.role == "user" and any(p.text for p in c.parts or [])), default=-1)
        answered = [
            p.function_response
            for c in contents[last_text + 1 :]
            for p in c.parts or []
            if p.function_response is not None and p.function_response.name != CONFIRMATION_CALL
        ]
        if answered:
            text = "; ".join(f"{r.name}: {json.dumps(r.response, sort_keys=True)}" for r in answered)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        parts = [types.Part(function_call=types.FunctionCall(name=c["name"], args=c["args"], id=c["id"])) for c in self.calls]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def agent(client: Client, calls: Sequence[Dict[str, Any]], resume_wait_seconds: float = 1) -> LlmAgent:
    """An LlmAgent with the scripted model and the three gated tools (an
    early confirmation waits 1 s for the approvers unless told: tests stay short)."""
    return LlmAgent(
        name="payments",
        model=ScriptedModel(model="scripted", calls=list(calls)),
        instruction="Make the tool calls you are asked for.",
        tools=[
            gated(refund, client, action="payments.refund", resume_wait_seconds=resume_wait_seconds),
            gated(hold, client, action="payments.hold", resume_wait_seconds=resume_wait_seconds),
            gated(mail, client, action="mail.send", resume_wait_seconds=resume_wait_seconds),
        ],
    )


def runner(root: Any, sessions: Optional[BaseSessionService] = None) -> Runner:
    return Runner(app_name=APP, agent=root, session_service=sessions or InMemorySessionService())


async def run_async(r: Runner, session_id: str, message: types.Content) -> List[Any]:
    """One run of the session with a new message: the events it made."""
    return [ev async for ev in r.run_async(user_id=USER, session_id=session_id, new_message=message)]


def run(r: Runner, session_id: str, message: Any) -> List[Any]:
    """run_async, from synchronous code; a str is a user's text message."""
    if isinstance(message, str):
        message = types.Content(role="user", parts=[types.Part(text=message)])
    return asyncio.run(run_async(r, session_id, message))


def new_session(r: Runner, session_id: str) -> Any:
    return asyncio.run(r.session_service.create_session(app_name=APP, user_id=USER, session_id=session_id))


def session(r: Runner, session_id: str) -> Any:
    s = asyncio.run(r.session_service.get_session(app_name=APP, user_id=USER, session_id=session_id))
    assert s is not None
    return s


def responses(events: Sequence[Any], name: Optional[str] = None) -> List[Dict[str, Any]]:
    """The function responses of the tools in events (not confirmations), in order."""
    out = []
    for ev in events:
        for fr in ev.get_function_responses():
            if fr.name != CONFIRMATION_CALL and (name is None or fr.name == name):
                out.append(dict(fr.response or {}))
    return out


def final_text(events: Sequence[Any]) -> str:
    texts = [p.text for ev in events if ev.content for p in ev.content.parts or [] if p.text]
    return texts[-1] if texts else ""


def sqlite_sessions(path: str) -> BaseSessionService:
    """ADK's SQLite session service on a file: two processes share it."""
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    return SqliteSessionService(path)
