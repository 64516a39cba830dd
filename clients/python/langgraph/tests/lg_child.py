"""The second process of the cross-process tests: builds the same agent on
the shared SQLite checkpoint and resumes the thread, as another worker of
the same application would.

    python lg_child.py SERVER_URL THREAD CHECKPOINT_DB INTERRUPT_ID CALLS_JSON

CS_LG_BACKEND names the backend, CS_LG_MODE what the tool does. The last
line printed is the JSON list of the tool messages' contents."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conftest  # noqa: E402,F401  (sys.path)

from countersign import Client  # noqa: E402
from langgraph.types import Command  # noqa: E402
from lg_harness import agent, sqlite_saver, tool_messages  # noqa: E402


def main() -> None:
    url, thread, db, interrupt_id, calls = sys.argv[1:6]
    graph = agent(Client(url, "ck_lg_agent"), json.loads(calls), sqlite_saver(db))
    cfg = {"configurable": {"thread_id": thread}}
    # Command as it is, not resume(): the other process may have answered
    # the interrupt already, and this one answers it all the same.
    out = graph.invoke(Command(resume={interrupt_id: {"type": "approve"}}), cfg)
    print(json.dumps([str(m.content) for m in tool_messages(out)]), flush=True)


if __name__ == "__main__":
    main()
