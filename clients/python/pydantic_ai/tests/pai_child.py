"""The second process of the cross-process tests: builds the same agent
and resumes the run from its message history (as JSON, Pydantic AI's
ModelMessagesTypeAdapter), as another worker of the same application would.

    python pai_child.py SERVER_URL MESSAGES_JSON_FILE TOOL_CALL_ID CALLS_JSON

CS_PAI_BACKEND names the backend, CS_PAI_MODE what the tool does. The last
line printed is the JSON of the resumed run's tool answers."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conftest  # noqa: E402,F401  (sys.path)

from countersign import Client  # noqa: E402
from pai_harness import agent, returns  # noqa: E402
from pydantic_ai import DeferredToolResults  # noqa: E402
from pydantic_ai.messages import ModelMessagesTypeAdapter  # noqa: E402


def main() -> None:
    url, path, tool_call_id, calls = sys.argv[1:5]
    with open(path, "rb") as f:
        history = ModelMessagesTypeAdapter.validate_json(f.read())
    ag = agent(Client(url, "ck_pai_agent"), [tuple(c) for c in json.loads(calls)])
    out = ag.run_sync(message_history=history, deferred_tool_results=DeferredToolResults(approvals={tool_call_id: True}))
    print(json.dumps({k: list(v) for k, v in returns(out.new_messages()).items()}), flush=True)


if __name__ == "__main__":
    main()
