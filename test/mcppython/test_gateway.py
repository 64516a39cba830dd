"""The MCP Python SDK's client (mcp 2.3.0, unmodified) against Countersign's
MCP gateway, with the reference memory and filesystem servers behind it.

Each test runs over streamable HTTP (`countersign serve`'s /mcp) and over
stdio (`countersign mcp`, a process of its own for each client), on
protocol 2026-07-28 and on 2025-11-25 where the feature exists there. Every
write has a name of its own (support.name), which the Go test checks
afterwards against what reached the upstream servers.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import datetime, timedelta
from typing import Any, Literal

import anyio
import pytest
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ElicitResult, InputRequiredResult, Request, RequestParams, Result, TextContent

from support import (
    CREATE,
    FS_DIR,
    LEGACY,
    MODERN,
    Answer,
    api,
    connect,
    credential_thread,
    decide,
    entity,
    name,
    proposal,
    proposals_of,
    status_of,
    stored_entities,
    text_of,
    upstream_calls,
)

pytestmark = pytest.mark.anyio

BOTH = [
    pytest.param("http", MODERN, id="http-2026"),
    pytest.param("stdio", MODERN, id="stdio-2026"),
    pytest.param("http", LEGACY, id="http-2025"),
    pytest.param("stdio", LEGACY, id="stdio-2025"),
]
MODERN_ONLY = [p for p in BOTH if p.values[1] == MODERN]


def short(transport: str, revision: str) -> str:
    return f"{transport}{revision[:4]}"


async def held(client: Any, written: str) -> str:
    """Calls create_entities for written with a client that is not asked
    in-band: the hold ends pending, and nothing more reaches the upstream.
    Returns the proposal id."""
    before = upstream_calls("create_entities", written)
    result = await client.call_tool(CREATE, entity(written))
    status, pid = status_of(result)
    assert result.is_error and status == "pending", result
    assert pid and pid.startswith("prp_"), result
    assert upstream_calls("create_entities", written) == before, "it reached the upstream before anyone approved"
    return pid


# --- a read ---------------------------------------------------------------


@pytest.mark.parametrize(("transport", "revision"), BOTH)
async def test_read_runs_at_once(transport: str, revision: str) -> None:
    """The tools are listed under their namespaces, the denied ones hidden;
    a read the file vouches for and a glob allows runs at once: one
    upstream call, no question, no proposal."""
    before = upstream_calls("read_graph")
    asker = Answer("accept")
    async with connect(transport, revision, elicitation_callback=asker) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for listed in (CREATE, "memory__read_graph", "fs__write_file", "fs__read_text_file", "fs__create_directory"):
            assert listed in tools, sorted(tools)
        assert not [n for n in tools if n.startswith("memory__delete_")], "a denied tool is listed"
        assert tools[CREATE].input_schema["properties"]["entities"], "the upstream's schema is not kept"
        result = await client.call_tool("memory__read_graph", {})
    assert not result.is_error, result
    graph = json.loads(text_of(result))
    assert isinstance(graph["entities"], list), graph
    assert asker.asked == [], "a read asked the client"
    assert upstream_calls("read_graph") == before + 1
    status, body = api("GET", "/v1/proposals?action=memory__read_graph")
    assert status == 200 and body["proposals"] == [], body


# --- held, approved elsewhere, collected ----------------------------------


@pytest.mark.parametrize(("transport", "revision"), MODERN_ONLY)
async def test_held_approved_collected_once_by_a_new_client(transport: str, revision: str) -> None:
    """2026-07-28: a write the client is not asked about holds and ends
    pending, in the credential's thread; approved over the HTTP API, the
    same call from a new client instance (over stdio, a new `countersign
    mcp` process) continues the proposal and runs it once; the next
    identical call is a new proposal, not the old answer replayed."""
    written = name("once", "memory", f"held_{short(transport, revision)}")
    async with connect(transport, revision) as first:
        pid = await held(first, written)
    p = proposal(pid)
    assert p["status"] == "pending" and p["thread_id"] == credential_thread() and p["requester"] == "alice", p
    decide(pid, "approve")

    async with connect(transport, revision) as second:
        result = await second.call_tool(CREATE, entity(written))
    assert not result.is_error, result
    assert written in text_of(result), result
    [p] = proposals_of(written)
    assert p["id"] == pid and p["status"] == "succeeded", p
    assert [d["via"] for d in p["decisions"]] == ["api"], p["decisions"]
    assert upstream_calls("create_entities", written) == 1
    assert stored_entities().count(written) == 1

    # Collected once: a third client's identical call is a new call.
    async with connect(transport, revision) as third:
        again = await held(third, written)
    assert again != pid
    decide(again, "cancel")
    assert upstream_calls("create_entities", written) == 1


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_held_approved_collected_by_its_session_2025(transport: str) -> None:
    """2025-11-25: a session is a thread. The held call, approved over the
    API, is collected by the same session's repeat, once; a new client
    instance (a new session) makes a proposal of its own instead, as
    docs/mcp.md says under "Not yet"."""
    written = name("once", "memory", f"held_{short(transport, LEGACY)}")
    async with connect(transport, LEGACY) as first:
        pid = await held(first, written)
        assert proposal(pid)["thread_id"].startswith("mcp_"), "a 2025 session's thread is mcp_<session id>"
        decide(pid, "approve")

        async with connect(transport, LEGACY) as other:
            separate = await held(other, written)
        assert separate != pid, "a new session continued the old session's proposal"
        decide(separate, "cancel")

        result = await first.call_tool(CREATE, entity(written))
        assert not result.is_error, result
    assert proposal(pid)["status"] == "succeeded"
    assert upstream_calls("create_entities", written) == 1
    assert stored_entities().count(written) == 1


# --- rejected, expired ----------------------------------------------------


@pytest.mark.parametrize(("transport", "revision"), BOTH)
async def test_rejected(transport: str, revision: str) -> None:
    """A held write rejected over the API: the repeat answers rejected with
    the reason, and nothing reaches the upstream. On 2026-07-28 over HTTP the
    repeat comes from a new client instance; over stdio (where a new
    instance is a new process, which docs/mcp.md says answers a new
    proposal instead) and on 2025 (a session's thread) from the same one."""
    written = name("never", "memory", f"rejected_{short(transport, revision)}")
    async with connect(transport, revision) as first:
        pid = await held(first, written)
        decide(pid, "reject", "not this entity")
        if transport == "http" and revision == MODERN:
            async with connect(transport, revision) as second:
                result = await second.call_tool(CREATE, entity(written))
        else:
            result = await first.call_tool(CREATE, entity(written))
    status, got = status_of(result)
    assert result.is_error and status == "rejected" and got == pid, result
    assert "not this entity" in text_of(result), result
    assert proposal(pid)["status"] == "rejected"
    assert upstream_calls("create_entities", written) == 0
    assert written not in stored_entities()


@pytest.mark.parametrize(("transport", "revision"), BOTH)
async def test_expired(transport: str, revision: str) -> None:
    """create_directory's rule gives its proposals 1 s, less than the 2 s
    hold: the call answers expired, and the folder is never made."""
    written = name("never", "fs", f"expired_{short(transport, revision)}")
    async with connect(transport, revision) as client:
        result = await client.call_tool("fs__create_directory", {"path": os.path.join(FS_DIR, written)})
    status, pid = status_of(result)
    assert result.is_error and status == "expired", result
    assert proposal(pid)["status"] == "expired"
    assert upstream_calls("create_directory", written) == 0
    assert not os.path.exists(os.path.join(FS_DIR, written))


# --- in-band: accept, decline, cancel -------------------------------------


@pytest.mark.parametrize(("transport", "revision"), BOTH)
@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
async def test_in_band(transport: str, revision: str, action: str) -> None:
    """The client declares elicitation: the gateway asks alice, a human who
    may approve through mcp, in the client (2026-07-28: an input_required
    result that the SDK answers and calls again with; 2025: an
    elicitation/create request during the call). accept approves (run
    once), decline rejects, cancel decides nothing and the hold ends
    pending."""
    expect = "once" if action == "accept" else "never"
    written = name(expect, "memory", f"inband_{action}_{short(transport, revision)}")
    asker = Answer(action)
    async with connect(transport, revision, elicitation_callback=asker) as client:
        result = await client.call_tool(CREATE, entity(written))
    assert len(asker.asked) == 1, asker.asked
    question = asker.asked[0]
    assert question.mode == "form" and CREATE in question.message, question
    assert "approve" in question.requested_schema["properties"], question.requested_schema
    [p] = proposals_of(written)
    if action == "accept":
        assert not result.is_error and written in text_of(result), result
        assert p["status"] == "succeeded", p
        assert [(d["via"], d["decision"], d["actor"]) for d in p["decisions"]] == [("mcp", "approved", "alice")], p
        assert upstream_calls("create_entities", written) == 1
        assert stored_entities().count(written) == 1
        return
    status, pid = status_of(result)
    assert pid == p["id"], (result, p)
    if action == "decline":
        assert result.is_error and status == "rejected", result
        assert [(d["via"], d["decision"]) for d in p["decisions"]] == [("mcp", "rejected")], p
    else:
        assert result.is_error and status == "pending", result
        assert p["status"] == "pending" and p["decisions"] == [], p
        decide(pid, "cancel")
    assert upstream_calls("create_entities", written) == 0
    assert written not in stored_entities()


# --- forged request states ------------------------------------------------

APPROVAL = "countersign.approval"


def approve_with(state: str) -> dict[str, Any]:
    return {"input_responses": {APPROVAL: ElicitResult(action="accept", content={"approve": True})}, "request_state": state}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def first_round(client: Any, written: str) -> InputRequiredResult:
    """The first round of a call the gateway asks about: the approval form and a signed state."""
    result = await client.session.call_tool(CREATE, entity(written), allow_input_required=True)
    assert isinstance(result, InputRequiredResult), result
    assert set(result.input_requests or {}) == {APPROVAL}, result
    assert result.request_state and result.request_state.startswith("v1."), result
    return result


async def undecided(client: Any, written: str, pid: str, **answer: Any) -> None:
    """Presents an answer that must decide nothing: the call goes on as a
    repeat (asked again, or held and pending), the proposal stays pending
    without decisions, and nothing reaches the upstream."""
    result = await client.session.call_tool(CREATE, entity(written), allow_input_required=True, **answer)
    if isinstance(result, InputRequiredResult):
        assert result.request_state != answer.get("request_state"), "the gateway handed back the state it was given"
    else:
        assert isinstance(result, CallToolResult), result
        assert result.is_error and status_of(result) == ("pending", pid), result
    p = proposal(pid)
    assert p["status"] == "pending" and p["decisions"] == [], p
    assert upstream_calls("create_entities", written) == 0


@pytest.mark.parametrize(("transport", "revision"), MODERN_ONLY)
async def test_forged_request_state_decides_nothing(transport: str, revision: str) -> None:
    """2026-07-28: an approval presented with a made-up state, a state whose
    MAC or payload was changed, another proposal's state, or a state
    already spent decides nothing; the state as the gateway made it, once,
    decides. The client drives the rounds itself
    (session.call_tool(allow_input_required=True)), as the SDK documents for
    a caller that keeps the state."""
    approved = name("once", "memory", f"forged_{short(transport, revision)}")
    replayed = name("never", "memory", f"replayed_{short(transport, revision)}")
    async with connect(transport, revision, elicitation_callback=Answer("decline")) as client:
        genuine = (await first_round(client, approved)).request_state
        other = (await first_round(client, replayed)).request_state
        [p] = proposals_of(approved)
        [q] = proposals_of(replayed)
        assert genuine and other and p["id"] != q["id"]

        version, payload, mac = genuine.split(".")
        flipped = mac[:-2] + ("AA" if mac[-2:] != "AA" else "BB")
        changed = b64(json.dumps({**json.loads(unb64(payload)), "x": 1}).encode())
        for forged in (
            "v1.e30.AAAA",  # made up
            f"{version}.{payload}.{flipped}",  # the MAC changed
            f"{version}.{changed}.{mac}",  # the payload changed, under its old MAC
            other,  # another proposal's
        ):
            await undecided(client, approved, p["id"], **approve_with(forged))

        # The state as the gateway made it decides, once.
        result = await client.session.call_tool(CREATE, entity(approved), **approve_with(genuine))
        assert isinstance(result, CallToolResult) and not result.is_error, result
        decided = proposal(p["id"])
        assert decided["status"] == "succeeded", decided
        assert [(d["via"], d["decision"]) for d in decided["decisions"]] == [("mcp", "approved")], decided
        assert upstream_calls("create_entities", approved) == 1

        # Spent by a cancel (which decides nothing), then presented again
        # with an approval: nothing.
        cancelled = await client.session.call_tool(
            CREATE, entity(replayed), allow_input_required=True,
            input_responses={APPROVAL: ElicitResult(action="cancel")}, request_state=other,
        )
        assert isinstance(cancelled, CallToolResult) and status_of(cancelled) == ("pending", q["id"]), cancelled
        await undecided(client, replayed, q["id"], **approve_with(other))
    decide(q["id"], "cancel")
    assert stored_entities().count(approved) == 1
    assert replayed not in stored_entities()


# --- Tasks ----------------------------------------------------------------
#
# The SDK 2.3.0 has no requester API for MCP Tasks
# (io.modelcontextprotocol/tasks): no tasks module, no tasks/get method of
# its own (mcp_types holds only the 2025-11-25 experimental task types). It
# has a public extension API (mcp.client.extension): a ClientExtension
# declares an extension in each request's capabilities and claims a result
# shape by its resultType, with a resolver that may send any request
# through the session's generic send_request. TasksExtension below is such
# an extension, written here: the SDK's own code carries the capability,
# parses the CreateTaskResult and hands it to the resolver.

TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(Result):
    """CreateTaskResult: a tools/call answered with a task."""

    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    ttl_ms: int
    poll_interval_ms: int | None = None


class TaskParams(RequestParams):
    task_id: str


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


class Task(Result):
    """A task as tasks/get shows it."""

    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    poll_interval_ms: int | None = None


async def get_task(session: Any, task_id: str) -> Task:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), Task)


async def follow(created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
    """The claim's resolver: polls tasks/get until the task ends, and answers its result."""
    while True:
        task = await get_task(ctx.session, created.task_id)
        if task.status == "completed":
            assert task.result is not None, task
            return CallToolResult.model_validate(task.result)
        if task.status in ("failed", "cancelled"):
            return CallToolResult(
                content=[TextContent(type="text", text=task.status_message or task.status)],
                structured_content={"status": task.status, "task_id": task.task_id, "error": task.error},
                is_error=True,
            )
        await anyio.sleep((task.poll_interval_ms or 1000) / 1000)


class TasksExtension(ClientExtension):
    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=follow)]


async def approve_when_proposed(written: str) -> str:
    """Waits (up to 30 s) for the proposal that writes written, approves it over the API and returns its id."""
    with anyio.fail_after(30):
        while True:
            found = await anyio.to_thread.run_sync(proposals_of, written)
            if found:
                [p] = found
                assert p["status"] == "pending" and p["mode"] == "independent", p
                await anyio.to_thread.run_sync(decide, p["id"], "approve")
                return p["id"]
            await anyio.sleep(0.1)


async def test_tasks_approved_over_http() -> None:
    """HTTP, 2026-07-28, the client declaring Tasks: server/discover lists
    the extension; a held write answers a task (its proposal, made in
    independent mode), which the resolver follows with tasks/get while it
    is approved over the API; the worker runs it once, and polling again
    runs nothing."""
    written = name("once", "memory", "task_approved_http2026")
    async with connect("http", MODERN, extensions=[TasksExtension()]) as client:
        discovered = client.session.discover_result
        assert discovered is not None and TASKS in (discovered.capabilities.extensions or {}), discovered
        async with anyio.create_task_group() as tg:
            approved: list[str] = []

            async def approve() -> None:
                approved.append(await approve_when_proposed(written))

            tg.start_soon(approve)
            with anyio.fail_after(60):
                result = await client.call_tool(CREATE, entity(written))
        assert not result.is_error and written in text_of(result), result
        [pid] = approved
        done = await get_task(client.session, pid)
        assert done.status == "completed" and written in json.dumps(done.result), done
    p = proposal(pid)
    assert p["status"] == "succeeded" and p["thread_id"] == credential_thread(), p
    assert upstream_calls("create_entities", written) == 1
    assert stored_entities().count(written) == 1


async def test_tasks_rejected_and_cancelled_over_http() -> None:
    """HTTP, 2026-07-28: the CreateTaskResult itself (allow_claimed) has
    the proposal's id and its expiry as createdAt + ttlMs; tasks/get says
    working, then failed naming the reason once rejected over the API;
    tasks/cancel withdraws another; a client that does not declare the
    extension is refused tasks/get (-32021). Nothing reaches the upstream."""
    rejected = name("never", "memory", "task_rejected_http2026")
    withdrawn = name("never", "memory", "task_cancelled_http2026")
    async with connect("http", MODERN, extensions=[TasksExtension()]) as client:
        created = await client.session.call_tool(CREATE, entity(rejected), allow_claimed=True)
        assert isinstance(created, CreatedTask) and created.status == "working", created
        p = proposal(created.task_id)
        assert p["status"] == "pending" and p["mode"] == "independent", p
        end = datetime.fromisoformat(created.created_at.replace("Z", "+00:00")) + timedelta(milliseconds=created.ttl_ms)
        assert end == datetime.fromisoformat(p["expires_at"].replace("Z", "+00:00")), (created, p["expires_at"])
        assert (await get_task(client.session, created.task_id)).status == "working"

        decide(created.task_id, "reject", "no tasks today")
        failed = await get_task(client.session, created.task_id)
        assert failed.status == "failed" and failed.error is not None, failed
        assert failed.error["data"]["reason"] == "rejected" and "no tasks today" in failed.error["message"], failed

        other = await client.session.call_tool(CREATE, entity(withdrawn), allow_claimed=True)
        assert isinstance(other, CreatedTask) and other.task_id != created.task_id, other
        await client.session.send_request(CancelTask(params=TaskParams(task_id=other.task_id)), Result)
        assert (await get_task(client.session, other.task_id)).status == "cancelled"
        assert proposal(other.task_id)["status"] == "cancelled"

    async with connect("http", MODERN) as plain:
        with pytest.raises(MCPError) as refused:
            await get_task(plain.session, created.task_id)
        assert refused.value.code == -32021, refused.value
    assert upstream_calls("create_entities", rejected) == 0
    assert upstream_calls("create_entities", withdrawn) == 0


async def test_tasks_not_offered_over_stdio() -> None:
    """stdio, 2026-07-28: `countersign mcp` runs no worker to execute
    tasks, so it does not offer them: server/discover does not list the
    extension, and a client that declares it is held and answered pending
    as any other."""
    written = name("never", "memory", "task_stdio2026")
    async with connect("stdio", MODERN, extensions=[TasksExtension()]) as client:
        discovered = client.session.discover_result
        assert discovered is not None and TASKS not in (discovered.capabilities.extensions or {}), discovered
        pid = await held(client, written)
    decide(pid, "cancel")
