"""The second process of the cross-process tests: builds the same agent on
the shared session store (ADK's SqliteSessionService on one file) and
answers the session's tool confirmation, as another worker of the same
application would.

    python adk_child.py SERVER_URL SESSION_ID SESSIONS_DB CONFIRMATION_ID CALLS_JSON

CS_ADK_BACKEND names the backend, CS_ADK_MODE what the tool does. The last
line printed is the JSON list of the tool responses the run made."""

import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conftest  # noqa: E402,F401  (sys.path)

from adk_harness import agent, responses, run_async, runner, sqlite_sessions  # noqa: E402
from countersign import Client  # noqa: E402
from countersign_google_adk import CONFIRMATION_CALL  # noqa: E402
from google.genai import types  # noqa: E402


def main() -> None:
    url, session_id, db, confirmation_id, calls = sys.argv[1:6]
    r = runner(agent(Client(url, "ck_adk_agent"), json.loads(calls)), sqlite_sessions(db))
    # The answer as it is, not confirm(): the other process may have
    # answered the confirmation already, and this one answers it all the same.
    answer = types.Content(
        role="user",
        parts=[types.Part(function_response=types.FunctionResponse(id=confirmation_id, name=CONFIRMATION_CALL, response={"confirmed": True}))],
    )
    events = asyncio.run(run_async(r, session_id, answer))
    print(json.dumps(responses(events)), flush=True)


if __name__ == "__main__":
    main()
