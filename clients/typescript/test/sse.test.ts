// The event-stream parser, on hostile and split input.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SSEParser, type SSEFrame } from "../dist/index.js";

function parseAll(text: string): SSEFrame[] {
  return new SSEParser().push(text);
}

test("SSEParser: frames, by table", () => {
  const cases: { name: string; text: string; want: SSEFrame[] }[] = [
    { name: "one frame", text: "id: 1\nevent: proposal.created\ndata: {}\n\n", want: [{ id: "1", event: "proposal.created", data: "{}" }] },
    { name: "CRLF", text: "id: 2\r\nevent: x\r\ndata: a\r\n\r\n", want: [{ id: "2", event: "x", data: "a" }] },
    { name: "CR alone", text: "id: 3\revent: x\rdata: a\r\r", want: [{ id: "3", event: "x", data: "a" }] },
    { name: "no space after colon", text: "id:4\nevent:x\ndata:a\n\n", want: [{ id: "4", event: "x", data: "a" }] },
    { name: "two spaces keep one", text: "data:  a\n\n", want: [{ id: undefined, event: "message", data: " a" }] },
    { name: "multi-line data", text: "data: a\ndata: b\n\n", want: [{ id: undefined, event: "message", data: "a\nb" }] },
    { name: "comments and retry", text: "retry: 2000\n\n: keep-alive\n\n", want: [] },
    { name: "no data, no frame", text: "id: 5\nevent: x\n\n", want: [] },
    { name: "unterminated frame", text: "id: 6\nevent: x\ndata: a\n", want: [] },
    { name: "NUL in id ignored", text: "id: 7\u0000\ndata: a\n\n", want: [{ id: undefined, event: "message", data: "a" }] },
    { name: "field without colon", text: "data\n\n", want: [{ id: undefined, event: "message", data: "" }] },
    { name: "unknown fields", text: "foo: bar\nbaz\ndata: a\n\n", want: [{ id: undefined, event: "message", data: "a" }] },
    { name: "BOM", text: "\ufeffdata: a\n\n", want: [{ id: undefined, event: "message", data: "a" }] },
    { name: "id per frame", text: "id: 8\ndata: a\n\ndata: b\n\n", want: [{ id: "8", event: "message", data: "a" }, { id: undefined, event: "message", data: "b" }] },
  ];
  for (const c of cases) assert.deepEqual(parseAll(c.text), c.want, c.name);
});

test("SSEParser: retry takes digits only", () => {
  const p = new SSEParser();
  p.push("retry: 1500\n\n");
  assert.equal(p.retry, 1500);
  p.push("retry: 1e3\nretry: -1\nretry: \n\n");
  assert.equal(p.retry, 1500);
});

test("SSEParser: every split point gives the same frames", () => {
  const text = "retry: 2000\r\n\r\nid: 10\r\nevent: proposal.decided\r\ndata: {\"id\":\"prp_1\"}\r\n\r\n: ka\n\nid: 11\revent: e\rdata: x\rdata: y\r\r";
  const want = parseAll(text);
  assert.equal(want.length, 2);
  for (let i = 0; i <= text.length; i++) {
    for (let j = i; j <= text.length; j += 7) {
      const p = new SSEParser();
      const got = [...p.push(text.slice(0, i)), ...p.push(text.slice(i, j)), ...p.push(text.slice(j))];
      assert.deepEqual(got, want, `split at ${i}, ${j}`);
    }
  }
});

test("SSEParser: random input never throws", () => {
  // A fixed-seed generator: the same inputs on every run.
  let seed = 42;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const alphabet = ["\n", "\r", ":", " ", "id", "data", "event", "retry", "\u0000", "\ufeff", "9", "é", "\ud800"];
  for (let n = 0; n < 2000; n++) {
    const p = new SSEParser();
    let s = "";
    const len = Math.floor(rand() * 40);
    for (let i = 0; i < len; i++) s += alphabet[Math.floor(rand() * alphabet.length)];
    for (const f of p.push(s)) {
      assert.equal(typeof f.data, "string");
      assert.equal(typeof f.event, "string");
    }
  }
});
