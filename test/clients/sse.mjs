// An EventSource client of GET /v1/events, as a browser or a Node.js
// service follows it: the npm eventsource package, with its own
// reconnection and Last-Event-ID. It prints one JSON line per happening on
// stdout (open, event, error) and closes when its stdin ends.
//
//   node sse.mjs URL TOKEN [FIRST_LAST_EVENT_ID]
//
// FIRST_LAST_EVENT_ID, if given, is sent on the first connection only, as
// a client resuming from a remembered position does.
import { EventSource } from "eventsource";

const [url, token, firstLastEventId] = process.argv.slice(2);
const names = ["proposal.created", "proposal.decided", "proposal.settled", "proposal.expired", "proposal.superseded"];
const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");

let connections = 0;
const es = new EventSource(url, {
  fetch: (input, init) => {
    connections++;
    const headers = { ...init.headers, Authorization: `Bearer ${token}` };
    if (connections === 1 && firstLastEventId !== undefined) headers["Last-Event-ID"] = firstLastEventId;
    return fetch(input, { ...init, headers });
  },
});
es.addEventListener("open", () => print({ kind: "open", connection: connections }));
es.addEventListener("error", (e) =>
  print({ kind: "error", code: e.code ?? null, message: e.message ?? null, closed: es.readyState === EventSource.CLOSED }),
);
for (const name of names) {
  es.addEventListener(name, (e) => {
    const p = JSON.parse(e.data);
    print({ kind: "event", id: e.lastEventId, type: e.type, proposal: p.id, status: p.status });
  });
}
process.stdin.on("end", () => {
  es.close();
  process.exit(0);
});
process.stdin.resume();
