// src/schema.d.ts is what openapi-typescript generates from the served
// OpenAPI document (server/openapi.json, which the server embeds).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = fileURLToPath(new URL("../", import.meta.url));

test("src/schema.d.ts matches the served OpenAPI document", () => {
  const work = mkdtempSync(join(tmpdir(), "countersign-schema-"));
  try {
    const out = join(work, "schema.d.ts");
    // Run away from any tool configuration, with the generator's defaults.
    execFileSync(join(pkg, "node_modules", ".bin", "openapi-typescript"), [join(pkg, "..", "..", "server", "openapi.json"), "-o", out], {
      cwd: work,
      stdio: ["ignore", "ignore", "pipe"],
    });
    const want = readFileSync(out, "utf8");
    const got = readFileSync(join(pkg, "src", "schema.d.ts"), "utf8");
    assert.ok(got === want, "src/schema.d.ts is out of date: run `npm run generate` in clients/typescript and commit it");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
