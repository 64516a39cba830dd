"""What the tests of test_gateway.py share: the server the Go test started
(mcppython_test.go), MCP Python SDK clients of its gateway over streamable
HTTP and over stdio, its HTTP API, and what reached the upstream servers.

The Go test sets, in the environment:

- COUNTERSIGN_URL: the server (`countersign serve`), whose gateway is /mcp;
- COUNTERSIGN_BIN and COUNTERSIGN_CONFIG: the binary and its configuration,
  which `countersign mcp` serves over stdio;
- COUNTERSIGN_STATE_SECRET_ENV and the variable it names: the secret that
  signs the gateway's request states (mcp.state_secret_env), which each
  `countersign mcp` needs too;
- COUNTERSIGN_FS_DIR: the filesystem server's folder;
- COUNTERSIGN_MEMORY_FILE: the memory server's file;
- COUNTERSIGN_UPSTREAM_CALLS: upstream_log.py's record of every tools/call
  that reached an upstream server, one JSON object a line;
- COUNTERSIGN_MANIFEST: where the tests write each name they write with,
  and whether its write must run once or never, for the Go test to check.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, ElicitRequestParams, ElicitResult


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: the Go test (go test ./test/mcppython, make test-mcp-python) runs these tests")
    return value


URL = _env("COUNTERSIGN_URL")
BIN = _env("COUNTERSIGN_BIN")
CONFIG = _env("COUNTERSIGN_CONFIG")
STATE_SECRET_ENV = _env("COUNTERSIGN_STATE_SECRET_ENV")
STATE_SECRET = _env(STATE_SECRET_ENV)
FS_DIR = _env("COUNTERSIGN_FS_DIR")
MEMORY_FILE = _env("COUNTERSIGN_MEMORY_FILE")
UPSTREAM_CALLS = _env("COUNTERSIGN_UPSTREAM_CALLS")
MANIFEST = _env("COUNTERSIGN_MANIFEST")

KEY = "key_alice"
"""alice's API key: a human's, the requester (and so the approver) of every call."""

MODERN = "2026-07-28"
"""The stateless revision: the SDK's default mode ("auto") discovers it."""

LEGACY = "2025-11-25"
"""The newest revision of the initialize handshake: the SDK's mode "legacy"."""

CREATE = "memory__create_entities"


def credential_thread(key: str = KEY) -> str:
    """The thread of a credential's 2026-07-28 calls: mcp: and the first 16 hex digits of the key's SHA-256."""
    return "mcp:" + hashlib.sha256(key.encode()).hexdigest()[:16]


def name(expect: str, server: str, test: str) -> str:
    """A name of its own for a test's write, recorded in the manifest.

    expect is "once" (the test approves the write: it must reach the
    upstream exactly once) or "never" (it must never reach it); the Go test
    checks both against upstream_log.py's record and the servers' state.
    """
    assert expect in ("once", "never")
    prefix = "ok" if expect == "once" else "no"
    made = f"{prefix}_{test}_{uuid.uuid4().hex[:8]}"
    with open(MANIFEST, "a", encoding="utf-8") as f:
        f.write(json.dumps({"name": made, "server": server, "expect": expect, "test": test}) + "\n")
    return made


def entity(entity_name: str) -> dict[str, Any]:
    """The arguments of memory__create_entities for one entity."""
    return {"entities": [{"name": entity_name, "entityType": "test", "observations": ["made by the MCP Python SDK test"]}]}


# --- the HTTP API ---------------------------------------------------------


def api(method: str, path: str, body: dict[str, Any] | None = None, key: str = KEY) -> tuple[int, Any]:
    """One request to the server's HTTP API: its status and its JSON body."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def decide(proposal_id: str, verdict: str, reason: str = "decided over the API") -> dict[str, Any]:
    """Approves, rejects or cancels a proposal over the API; returns the proposal."""
    status, body = api("POST", f"/v1/proposals/{proposal_id}/{verdict}", {"reason": reason})
    assert status == 200 and body["status"] == "applied", (verdict, status, body)
    return body["proposal"]


def proposal(proposal_id: str) -> dict[str, Any]:
    status, body = api("GET", f"/v1/proposals/{proposal_id}")
    assert status == 200, (status, body)
    return body


def proposals_of(written: str) -> list[dict[str, Any]]:
    """alice's proposals whose input writes the entity, file or folder named written, newest first."""
    status, body = api("GET", "/v1/proposals?limit=1000")
    assert status == 200, (status, body)
    out = []
    for p in body["proposals"]:
        entities = [e.get("name") for e in (p.get("input") or {}).get("entities") or []]
        path = (p.get("input") or {}).get("path") or ""
        if written in entities or os.path.basename(path) == written:
            out.append(p)
    return out


# --- what reached the upstreams -------------------------------------------


def upstream_calls(tool: str, written: str | None = None) -> int:
    """How many tools/call requests of the upstream tool reached its server (with written among their names)."""
    n = 0
    try:
        with open(UPSTREAM_CALLS, encoding="utf-8") as f:
            lines = f.readlines()
    except FileNotFoundError:
        return 0
    for line in lines:
        c = json.loads(line)
        if c["tool"] != tool:
            continue
        args = c.get("arguments") or {}
        names = [e.get("name") for e in args.get("entities") or []]
        if args.get("path"):
            names.append(os.path.basename(args["path"]))
        if written is None or written in names:
            n += 1
    return n


def stored_entities() -> list[str]:
    """The names of the entities in the memory server's file, as often as they are there."""
    try:
        with open(MEMORY_FILE, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return [x["name"] for x in lines if x.get("type") == "entity"]


# --- clients ----------------------------------------------------------------


class Answer:
    """An elicitation callback: answers every form with action (and, for accept, approve), and keeps what it was asked."""

    def __init__(self, action: str, approve: bool = True) -> None:
        self.action = action
        self.approve = approve
        self.asked: list[ElicitRequestParams] = []

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params)
        if self.action == "accept":
            return ElicitResult(action="accept", content={"approve": self.approve, "reason": "answered in the Python client"})
        return ElicitResult(action=self.action)


@asynccontextmanager
async def connect(transport: str, revision: str, *, key: str = KEY, **options: Any) -> AsyncIterator[Client]:
    """A new MCP Python SDK client of the gateway, as key's identity.

    transport is "http" (streamable HTTP to /mcp, the key as a bearer token)
    or "stdio" (a `countersign mcp --config --token` process of its own);
    revision is MODERN (mode "auto": server/discover) or LEGACY (mode
    "legacy": the initialize handshake). options go to Client as they are
    (elicitation_callback, extensions).
    """
    mode = "auto" if revision == MODERN else "legacy"
    if transport == "http":
        timeout = httpx2.Timeout(30, read=120)
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=timeout) as http:
            async with Client(streamable_http_client(URL + "/mcp", http_client=http), mode=mode, **options) as client:
                assert client.protocol_version == revision, client.protocol_version
                yield client
        return
    assert transport == "stdio", transport
    server = StdioServerParameters(
        command=BIN,
        args=["mcp", "--config", CONFIG, "--token", key],
        env={STATE_SECRET_ENV: STATE_SECRET},
    )
    async with Client(server, mode=mode, **options) as client:
        assert client.protocol_version == revision, client.protocol_version
        yield client


def status_of(result: CallToolResult) -> tuple[str | None, str | None]:
    """The gateway's (status, proposal_id) of a result in its own words; (None, None) for an upstream's result."""
    sc = result.structured_content
    if not isinstance(sc, dict):
        return None, None
    return sc.get("status"), sc.get("proposal_id")


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)
