// Validates AG-UI events against the official schemas of @ag-ui/core (the
// zod validators of its /schemas entry), as agui/event's tests feed them:
// one JSON event per line on stdin.
//
//   node agui-validate.mjs < events.jsonl
//
// Each event must parse with EventSchemas and carry no property the schema
// does not declare, at any depth. The zod objects are loose (a consumer
// strips what it does not know, with a warning), but the AG-UI JSON Schema
// they are generated from closes every object, and a producer must emit
// only what the protocol describes; so an unknown key here is a failure.
// Open-by-key values (metadata, state, payloads, JSON Schemas) are not
// objects of the schema and are not walked.
//
// On success it prints {"ok": N, "protocolVersion": "…"} and exits 0; on the
// first bad line it prints the line's number, its type and the reason on
// stderr and exits 1. Empty lines are skipped.
import { createInterface } from "node:readline";
import { EventSchemas, PROTOCOL_VERSION } from "@ag-ui/core/schemas";

// unknownKey returns the path of the first property of value that schema
// does not declare, or null. It follows zod 4's definitions: object shapes,
// optional wrappers, arrays and unions (the option that accepts the value).
function unknownKey(schema, value, path) {
  const def = schema?._zod?.def;
  if (def === undefined || value === null || typeof value !== "object") return null;
  switch (def.type) {
    case "optional":
    case "nullable":
    case "default":
    case "readonly":
      return unknownKey(def.innerType, value, path);
    case "pipe":
      return unknownKey(def.in, value, path);
    case "lazy":
      return unknownKey(def.getter(), value, path);
    case "array":
      if (!Array.isArray(value)) return null;
      for (let i = 0; i < value.length; i++) {
        const found = unknownKey(def.element, value[i], `${path}[${i}]`);
        if (found) return found;
      }
      return null;
    case "union":
      for (const option of def.options) {
        if (option.safeParse(value).success) return unknownKey(option, value, path);
      }
      return null;
    case "object":
      if (Array.isArray(value)) return null;
      for (const key of Object.keys(value)) {
        if (!Object.hasOwn(def.shape, key)) return `${path}.${key}`;
        const found = unknownKey(def.shape[key], value[key], `${path}.${key}`);
        if (found) return found;
      }
      return null;
    default:
      // custom (metadata, responseSchema), any (state, payloads), records:
      // open by key, their keys are data.
      return null;
  }
}

function fail(lineNo, type, reason) {
  process.stderr.write(`line ${lineNo} (${type ?? "no type"}): ${reason}\n`);
  process.exit(1);
}

let lineNo = 0;
let ok = 0;
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  lineNo++;
  if (line.trim() === "") continue;
  let value;
  try {
    value = JSON.parse(line);
  } catch (err) {
    fail(lineNo, undefined, `not JSON: ${err.message}`);
  }
  const type = value?.type;
  const parsed = EventSchemas.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "(event)"}: ${i.message}`);
    fail(lineNo, type, `rejected by EventSchemas: ${issues.join("; ")}`);
  }
  const extra = unknownKey(EventSchemas, value, "");
  if (extra) fail(lineNo, type, `${extra.slice(1)} is not a property the schema declares`);
  ok++;
}
process.stdout.write(JSON.stringify({ ok, protocolVersion: PROTOCOL_VERSION }) + "\n");
