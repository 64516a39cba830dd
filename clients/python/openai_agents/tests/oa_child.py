"""The second process of the cross-process tests: builds the same agent,
loads the RunState the first process saved, records the approval the way
an application would (state.approve on each interruption) and resumes the
run, as another worker of the same application would.

    python oa_child.py SERVER_URL STATE_FILE CALLS_JSON

CS_OA_BACKEND names the backend, CS_OA_MODE what the tool does. The last
line printed is the JSON list of the tool outputs."""

import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conftest  # noqa: E402,F401  (sys.path)

from agents import Runner, RunState  # noqa: E402
from countersign import Client  # noqa: E402
from oa_harness import agent, call, outputs  # noqa: E402


async def main() -> None:
    url, path, calls = sys.argv[1:4]
    a = agent(Client(url, "ck_oa_agent"), [call(c["name"], c["args"], c["id"]) for c in json.loads(calls)])
    with open(path) as f:
        state = await RunState.from_string(a, f.read())
    for item in state.get_interruptions():
        state.approve(item)
    result = await Runner.run(a, state)
    print(json.dumps(outputs(result)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
