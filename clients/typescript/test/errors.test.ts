// CountersignError from the API's error bodies, and from bodies that are not.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Countersign, CountersignError } from "../dist/index.js";

function answering(status: number, body: string, headers: Record<string, string> = {}) {
  return new Countersign({
    baseUrl: "http://countersign.test/",
    token: "t",
    fetch: async () => new Response(body, { status, headers: { "Content-Type": "application/json", ...headers } }),
  });
}

test("error answers become CountersignError", async () => {
  const cases = [
    {
      name: "the API's error",
      status: 400,
      body: JSON.stringify({ error: { code: "INVALID_INPUT", message: "bad", details: [{ path: "/amount", message: "x" }] } }),
      want: { status: 400, code: "INVALID_INPUT", message: "bad", details: [{ path: "/amount", message: "x" }] },
    },
    {
      name: "a decision's not_found",
      status: 404,
      body: JSON.stringify({ status: "not_found", error: { code: "NOT_FOUND", message: "no such proposal" } }),
      want: { status: 404, code: "NOT_FOUND", message: "no such proposal", details: undefined },
    },
    { name: "HTML", status: 502, body: "<html>bad gateway</html>", want: { status: 502, code: "INVALID_RESPONSE" } },
    { name: "empty", status: 500, body: "", want: { status: 500, code: "INVALID_RESPONSE" } },
    { name: "error not an object", status: 400, body: '{"error": "x"}', want: { status: 400, code: "INVALID_RESPONSE" } },
    { name: "code not a string", status: 400, body: '{"error": {"code": 1, "message": "m"}}', want: { status: 400, code: "INVALID_RESPONSE" } },
    { name: "array", status: 409, body: "[1,2]", want: { status: 409, code: "INVALID_RESPONSE" } },
  ];
  for (const c of cases) {
    const err = await answering(c.status, c.body).getProposal("prp_1").then(
      () => assert.fail(`${c.name}: resolved`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof CountersignError, c.name);
    for (const [k, v] of Object.entries(c.want)) {
      assert.deepEqual((err as unknown as Record<string, unknown>)[k], v, `${c.name}: ${k}`);
    }
  }
});

test("Retry-After is read", async () => {
  const err = await answering(503, JSON.stringify({ error: { code: "UNAVAILABLE", message: "down" } }), { "Retry-After": "3" })
    .getThread("t")
    .catch((e: unknown) => e);
  assert.ok(err instanceof CountersignError);
  assert.equal(err.retryAfter, 3);
});

test("a 200 that is not JSON is INVALID_RESPONSE", async () => {
  const err = await answering(200, "not json").getProposal("p").catch((e: unknown) => e);
  assert.ok(err instanceof CountersignError);
  assert.equal(err.code, "INVALID_RESPONSE");
});

test("options are checked", () => {
  assert.throws(() => new Countersign({ baseUrl: "", token: "t" }), /baseUrl/);
  assert.throws(() => new Countersign({ baseUrl: "http://x", token: "" }), /token/);
});

test("listProposals follows X-Action-Proposals-Next, decoded", async () => {
  const seen: string[] = [];
  const pages: Record<string, { next?: string; ids: string[] }> = {
    "": { next: encodeURIComponent("c 1+/="), ids: ["a"] },
    "c 1+/=": { next: encodeURIComponent("c2"), ids: [] },
    c2: { ids: ["b"] },
  };
  const c = new Countersign({
    baseUrl: "http://countersign.test",
    token: "t",
    fetch: async (url) => {
      const u = new URL(url);
      const after = u.searchParams.get("after") ?? "";
      seen.push(after);
      const page = pages[after];
      if (!page) return new Response('{"error":{"code":"INVALID_CURSOR","message":"x"}}', { status: 400 });
      const headers: Record<string, string> = {};
      if (page.next) headers["X-Action-Proposals-Next"] = page.next;
      return new Response(JSON.stringify({ proposals: page.ids.map((id) => ({ id })) }), { headers });
    },
  });
  const all = await c.listProposals({ status: ["pending", "approved"], limit: 1 });
  assert.deepEqual(all.map((p) => p.id), ["a", "b"]);
  assert.deepEqual(seen, ["", "c 1+/=", "c2"]);
});
