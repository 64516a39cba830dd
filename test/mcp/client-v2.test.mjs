// The MCP TypeScript SDK v2 client (@modelcontextprotocol/client, as
// package-lock.json pins it), unmodified, against the gateway of the server
// the Go test started, in both of its modes: legacy (the default: a 2025
// initialize and a session) and 2026-07-28 (versionNegotiation pinned:
// stateless, a _meta envelope on every request, input_required answered by
// its own multi round-trip driver), over streamable HTTP (/mcp) and over
// stdio (countersign mcp, as a desktop client starts it). Each mode and
// transport runs the same cases, naming its entities v2_<mode>_<transport>_
// <case>, which the Go test counts in the calls the memory server received.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import {
  accept, api, approval, bin, config, createEntity, createdName, decide, decline, dismiss, fingerprint, forgeState, fsDir,
  observe, outcome, proposal, proposalsOf, recordSent, sentCall, server,
} from "./support.mjs";

// connect starts a new client instance in mode ("legacy" or "2026") over
// transport ("http" or "stdio") as key's holder. With answer, the client
// declares form elicitation and answers each question with it, keeping
// them in client.asked; manual turns the SDK's input_required driver off, so
// that the test answers itself.
async function connect(mode, transport, { key = "key_alice", answer, manual = false } = {}) {
  const options = { capabilities: answer ? { elicitation: { form: {} } } : {} };
  if (mode === "2026") options.versionNegotiation = { mode: { pin: "2026-07-28" } };
  if (manual) options.inputRequired = { autoFulfill: false };
  const client = new Client({ name: "countersign-e2e-v2", version: "1.0.0" }, options);
  client.asked = [];
  if (answer) {
    client.setRequestHandler("elicitation/create", async (req) => {
      client.asked.push(req.params);
      return answer(req.params);
    });
  }
  const t = transport === "http"
    ? new StreamableHTTPClientTransport(new URL(`${server}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${key}` } } })
    : new StdioClientTransport({ command: bin, args: ["mcp", "--config", config, "--token", key], stderr: "ignore", env: { ...process.env } });
  client.sent = recordSent(t);
  await client.connect(t);
  assert.equal(client.getProtocolEra(), mode === "2026" ? "modern" : "legacy");
  assert.equal(client.getNegotiatedProtocolVersion(), mode === "2026" ? "2026-07-28" : "2025-11-25");
  return client;
}

// using runs body with clients and closes them after.
async function using(clients, body) {
  try {
    return await body();
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}

// entities are the names in the memory server's graph, read through the
// gateway (a read the policy allows).
async function entities(client) {
  const res = await client.callTool({ name: "memory__read_graph", arguments: {} });
  assert.ok(!res.isError, JSON.stringify(res));
  return JSON.parse(res.content[0].text).entities.map((e) => e.name);
}

// only is the one proposal that creates name.
async function only(name) {
  const ps = await proposalsOf(name);
  assert.equal(ps.length, 1, `proposals of ${name}: ${JSON.stringify(ps.map((p) => [p.id, p.status]))}`);
  return ps[0];
}

for (const mode of ["legacy", "2026"]) {
  for (const transport of ["http", "stdio"]) {
    const tag = (c) => `v2_${mode}_${transport}_${c}`;
    const fresh = (opts) => connect(mode, transport, opts);
    // The thread a 2026-07-28 call belongs to; a 2025 call's is its session's.
    const credentialThread = `mcp:${fingerprint("key_alice")}`;

    describe(`TypeScript SDK v2, ${mode === "2026" ? "2026-07-28" : "legacy (2025)"}, over ${transport}`, () => {
      test("the tools are listed; a read the policy allows runs at once, asking and storing nothing", async () => {
        const client = await fresh({ answer: () => accept });
        await using([client], async () => {
          const { tools } = await client.listTools();
          const names = tools.map((t) => t.name);
          for (const name of ["memory__create_entities", "memory__read_graph", "fs__read_text_file"]) {
            assert.ok(names.includes(name), `${name} is not listed: ${names}`);
          }
          assert.deepEqual(names.filter((n) => n.startsWith("memory__delete_")), [], "a denied tool is listed");
          const read = await client.callTool({ name: "fs__read_text_file", arguments: { path: join(fsDir, "keep.txt") } });
          assert.ok(!read.isError, JSON.stringify(read));
          assert.match(read.content[0].text, /original/);
          assert.ok(Array.isArray(await entities(client)));
          assert.deepEqual(client.asked, [], "a read asked the client");
          for (const action of ["fs__read_text_file", "memory__read_graph"]) {
            const { body } = await api("GET", `/v1/proposals?action=${action}`);
            assert.deepEqual(body.proposals, [], `a read made a proposal of ${action}`);
          }
        });
      });

      test(mode === "2026"
        ? "held without elicitation, approved over the API, collected once by a new client instance (the credential's thread)"
        : "held without elicitation, approved over the API: a new client instance proposes anew (the session's thread), the first collects it once", async () => {
        const name = tag("held");
        const first = await fresh();
        let second;
        try {
          const held = outcome(await first.callTool(createEntity(name)));
          assert.equal(held.status, "pending");
          assert.ok(!(await entities(first)).includes(name), "it ran before anyone approved");
          const p = await proposal(held.proposal_id);
          if (mode === "2026") assert.equal(p.thread_id, credentialThread);
          else assert.match(p.thread_id, /^mcp_/);
          await decide(held.proposal_id, "approve");
          second = await fresh();
          const again = await second.callTool(createEntity(name));
          if (mode === "2026") {
            // The credential's thread continues the proposal, whichever
            // instance (or, over stdio, process) calls again.
            assert.equal(createdName(again), name);
          } else {
            // A 2025 thread is the session: the new instance's identical
            // call is a proposal of its own (docs/mcp.md, "Not yet"),
            // withdrawn here; the session that made the first collects it.
            const other = outcome(again);
            assert.equal(other.status, "pending");
            assert.notEqual(other.proposal_id, held.proposal_id);
            await decide(other.proposal_id, "cancel");
            assert.equal(createdName(await first.callTool(createEntity(name))), name);
          }
          assert.ok((await entities(second)).includes(name));
          const done = await proposal(held.proposal_id);
          assert.equal(done.status, "succeeded", JSON.stringify(done));
          assert.equal(done.decisions.length, 1);
          assert.equal(done.decisions[0].via, "api");
        } finally {
          await first.close();
          await second?.close();
        }
      });

      test("rejected over the API: the repeat is answered rejected, and nothing runs", async () => {
        const name = tag("rejected");
        const first = await fresh();
        let repeater = first;
        try {
          const held = outcome(await first.callTool(createEntity(name)));
          assert.equal(held.status, "pending");
          await decide(held.proposal_id, "reject", { reason: "not this entity" });
          // Over HTTP a 2026 client's new instance reaches the process that
          // held the call, which answers the rejection; over stdio a new
          // instance is another process, which would propose anew
          // (docs/mcp.md, "Not yet"), and a 2025 thread is the session:
          // the same instance repeats.
          if (mode === "2026" && transport === "http") repeater = await fresh();
          const res = outcome(await repeater.callTool(createEntity(name)));
          assert.deepEqual([res.proposal_id, res.status], [held.proposal_id, "rejected"]);
          assert.ok(!(await entities(repeater)).includes(name));
          assert.equal((await proposal(held.proposal_id)).status, "rejected");
        } finally {
          await first.close();
          if (repeater !== first) await repeater.close();
        }
      });

      test("expired (a one-second rule): the held call answers expired, and nothing runs", async () => {
        const client = await fresh();
        await using([client], async () => {
          const res = outcome(await client.callTool(observe(tag("expired"))));
          assert.equal(res.status, "expired", JSON.stringify(res));
          const p = await proposal(res.proposal_id);
          assert.equal(p.status, "expired");
          assert.deepEqual(p.decisions, []);
        });
      });

      test("in-band: accept runs the call once, decline rejects it, cancel decides nothing and holds", async () => {
        const yes = await fresh({ answer: () => accept });
        const no = await fresh({ answer: () => decline });
        const later = await fresh({ answer: () => dismiss });
        await using([yes, no, later], async () => {
          const accepted = tag("accepted");
          assert.equal(createdName(await yes.callTool(createEntity(accepted))), accepted);
          assert.equal(yes.asked.length, 1, "asked more or less than once");
          assert.equal(yes.asked[0].mode ?? "form", "form");
          assert.match(yes.asked[0].message, /memory__create_entities/);
          const ran = await only(accepted);
          assert.equal(ran.status, "succeeded");
          assert.deepEqual(ran.decisions.map((d) => [d.decision, d.via]), [["approved", "mcp"]]);
          // 2026-07-28 asks through the result: the SDK called again with
          // the answer and the gateway's state. 2025 asks with an
          // elicitation/create request, answered as its response.
          const answers = yes.sent.filter((m) => m.method === "tools/call" && m.params?.inputResponses);
          if (mode === "2026") {
            assert.equal(answers.length, 1, JSON.stringify(yes.sent));
            assert.deepEqual(answers[0].params.inputResponses[approval], accept);
            assert.match(answers[0].params.requestState, /^v1\./);
          } else {
            assert.deepEqual(answers, []);
          }

          const refused = outcome(await no.callTool(createEntity(tag("declined"))));
          assert.equal(refused.status, "rejected");
          assert.equal(no.asked.length, 1);
          assert.deepEqual((await proposal(refused.proposal_id)).decisions.map((d) => [d.decision, d.via]), [["rejected", "mcp"]]);

          const held = outcome(await later.callTool(createEntity(tag("cancelled"))));
          assert.equal(held.status, "pending");
          assert.equal(later.asked.length, 1);
          const p = await proposal(held.proposal_id);
          assert.equal(p.status, "pending");
          assert.deepEqual(p.decisions, []);
          await decide(held.proposal_id, "cancel");
          assert.ok(!(await entities(yes)).some((n) => n === tag("declined") || n === tag("cancelled")));
        });
      });

      if (mode === "2026") {
        test("a forged requestState decides nothing: signed with another secret, tampered, another proposal's, another credential's, spent", async () => {
          const client = await fresh({ answer: () => accept, manual: true });
          const eve = await fresh({ key: "key_eve", answer: () => accept, manual: true });
          await using([client, eve], async () => {
            const call = createEntity(tag("forged"));
            const ask = async (c, params) => {
              const res = await c.callTool(params, { allowInputRequired: true });
              assert.equal(res.resultType, "input_required", `not asked: ${JSON.stringify(res)}`);
              assert.equal(res.content, undefined, "an input_required result with content");
              assert.equal(typeof res.requestState, "string");
              assert.ok(res.inputRequests?.[approval], JSON.stringify(res));
              return res.requestState;
            };
            const state = await ask(client, call);
            const [p] = await proposalsOf(tag("forged"));
            const otherState = await ask(client, createEntity(tag("forged_other")));
            const [other] = await proposalsOf(tag("forged_other"));
            const evesState = await ask(eve, call);
            const [payload] = otherState.split(".").slice(1);
            const claims = JSON.parse(Buffer.from(payload, "base64url"));
            const tampered = `v1.${Buffer.from(JSON.stringify({ ...claims, pr: p.id, dg: p.input_digest })).toString("base64url")}.${otherState.split(".")[2]}`;
            for (const [what, forged] of [["signed with another secret", forgeState(p)], ["tampered", tampered],
              ["another proposal's", otherState], ["another credential's (eve's)", evesState]]) {
              const again = await ask(client, { ...call, inputResponses: { [approval]: accept }, requestState: forged });
              assert.notEqual(again, forged, what);
              assert.ok(sentCall(client.sent, forged), `${what}: the state was not sent`);
              const now = await proposal(p.id);
              assert.deepEqual([now.status, now.decisions], ["pending", []], `${what} decided ${p.id}`);
            }
            assert.deepEqual((await proposal(other.id)).decisions, []);
            // The state the gateway gave is answered once: dismissed (which
            // decides nothing), the call holds; presented again, spent, it
            // is asked anew; the new state declines it, and nothing runs.
            const dismissed = outcome(await client.callTool({ ...call, inputResponses: { [approval]: dismiss }, requestState: state },
              { allowInputRequired: true }));
            assert.deepEqual([dismissed.proposal_id, dismissed.status], [p.id, "pending"]);
            const renewed = await ask(client, { ...call, inputResponses: { [approval]: accept }, requestState: state });
            assert.deepEqual((await proposal(p.id)).decisions, [], "the spent state decided");
            const answered = outcome(await client.callTool({ ...call, inputResponses: { [approval]: decline }, requestState: renewed },
              { allowInputRequired: true }));
            assert.deepEqual([answered.proposal_id, answered.status], [p.id, "rejected"]);
            await decide(other.id, "cancel");
            const [evesProposal] = await proposalsOf(tag("forged"), { key: "key_eve" });
            assert.deepEqual(evesProposal.decisions, []);
            await decide(evesProposal.id, "cancel", { key: "key_eve" });
          });
        });
      } else {
        test("a requestState sent on a 2025 session decides nothing: the call holds", async () => {
          const client = await fresh();
          await using([client], async () => {
            const call = createEntity(tag("forged"));
            const held = outcome(await client.callTool(call));
            const p = await proposal(held.proposal_id);
            const forged = forgeState(p);
            const again = outcome(await client.callTool({ ...call, inputResponses: { [approval]: accept }, requestState: forged }));
            assert.ok(sentCall(client.sent, forged), "the state was not sent");
            assert.deepEqual([again.proposal_id, again.status], [p.id, "pending"]);
            assert.deepEqual((await proposal(p.id)).decisions, []);
            await decide(p.id, "cancel");
          });
        });
      }
    });
  }
}
