package mcptest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/servetest"
	"github.com/countersign/countersign/mcpgateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stateSecretEnv names the variable that holds the secret signing the
// 2026-07-28 request states (mcp.state_secret_env): every process serving
// the configuration gets the same one, as the docs ask.
const stateSecretEnv = "COUNTERSIGN_MCP_STATE_SECRET"

// TestGatewayWithReferenceServers runs the node tests (*.test.mjs) against
// the gateway on each store, then counts the calls the upstreams received:
// each entity and file the node tests had approved, made by one call; none
// they did not.
func TestGatewayWithReferenceServers(t *testing.T) {
	dir := nodetest.Need(t, ".", "this test runs the reference MCP servers and the MCP TypeScript SDK's clients")
	bin := servetest.Build(t)
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"SQLite", func(t *testing.T) string { return servetest.SQLiteStore(t) }},
		{"PostgreSQL", func(t *testing.T) string { return servetest.PostgresStore(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			data := filepath.Join(tmp, "data")
			if err := os.Mkdir(data, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(data, "keep.txt"), []byte("original\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			up := upstreamFiles{
				memory:      filepath.Join(tmp, "memory.jsonl"),
				memoryCalls: filepath.Join(tmp, "memory-calls.jsonl"),
				fsCalls:     filepath.Join(tmp, "fs-calls.jsonl"),
				data:        data,
			}
			config := writeConfig(t, dir, tc.store(t), up)
			// The Tasks test stops and starts a server of its own on a
			// store of its own (a memory server of its own too, since two
			// writing one file could lose an entity), counting its calls
			// with the others.
			restartUp := up
			restartUp.memory = filepath.Join(tmp, "memory-restart.jsonl")
			restartConfig := writeConfig(t, dir, tc.store(t), restartUp)
			secret := stateSecretEnv + "=" + "e2e-" + tc.name + "-state-secret-of-at-least-32-bytes"
			base := servetest.Start(t, bin, config, secret)
			servetest.WaitReady(t, base)
			servetest.NPMTest(t, dir, 6*time.Minute, "COUNTERSIGN_URL="+base, "COUNTERSIGN_FS_DIR="+data,
				"COUNTERSIGN_BIN="+bin, "COUNTERSIGN_CONFIG="+config, "COUNTERSIGN_RESTART_CONFIG="+restartConfig, secret)
			checkUpstreamCalls(t, up, restartUp.memory)
		})
	}
}

// upstreamFiles are where the upstreams of one configuration keep their
// state and where their calls are counted (upstream-tap.mjs).
type upstreamFiles struct {
	memory      string // the memory server's store, a JSON line per entity or relation
	memoryCalls string // the tools/call requests the memory server received
	fsCalls     string // the tools/call requests the filesystem server received
	data        string // the folder the filesystem server serves
}

// The entities the node tests create (memory__create_entities): each of
// wantOnce approved, so created by exactly one upstream call; none of
// neverCalled (rejected, declined, cancelled, expired, withdrawn, forged
// approvals, tasks never approved) reaching the upstream at all.
// wantRestart is the entity of the task polled across a restart, stored by
// that server's memory server.
var (
	wantOnce    = []string{"e_approved", "e_hold", "e_stdio_approved", "e_stdio_held", "v2_2026_http_task"}
	neverCalled = []string{"e_rejected", "e_other_tenant", "e_inspector", "e_forged_http", "e_forged_stdio",
		"v2_2026_http_task_rejected", "v2_2026_http_task_cancelled", "v2_legacy_http_task", "v2_2026_stdio_task"}
	wantRestart = "v2_task_restart"
)

// The TypeScript SDK v2 tests (client-v2.test.mjs) name their entities
// v2_<mode>_<transport>_<case>; on 2026-07-28 the forged states' test
// makes a second proposal, forged_other.
func init() {
	for _, client := range []string{"v2_legacy_http", "v2_legacy_stdio", "v2_2026_http", "v2_2026_stdio"} {
		wantOnce = append(wantOnce, client+"_held", client+"_accepted")
		for _, c := range []string{"rejected", "declined", "cancelled", "forged"} {
			neverCalled = append(neverCalled, client+"_"+c)
		}
		if strings.HasPrefix(client, "v2_2026_") {
			neverCalled = append(neverCalled, client+"_forged_other")
		}
	}
}

// checkUpstreamCalls reads what the upstreams received and stored: each
// entity created by at most one call (one per proposal), those the node
// tests approved by exactly one and present once in the memory server's
// file, the others by none and absent; no memory__add_observations call
// (the tool whose proposals the policy lets expire) at all; the approved
// file written once, the declined writes never.
func checkUpstreamCalls(t *testing.T, up upstreamFiles, restartMemory string) {
	t.Helper()
	created := map[string]int{}
	for _, call := range readCalls(t, up.memoryCalls) {
		switch call.Name {
		case "create_entities":
			var args struct {
				Entities []struct {
					Name string `json:"name"`
				} `json:"entities"`
			}
			if err := json.Unmarshal(call.Arguments, &args); err != nil {
				t.Fatalf("create_entities arguments %s: %v", call.Arguments, err)
			}
			for _, e := range args.Entities {
				created[e.Name]++
			}
		case "add_observations":
			t.Errorf("add_observations reached the memory server (%s), but every proposal of it expired", call.Arguments)
		}
	}
	for name, n := range created {
		if n > 1 {
			t.Errorf("entity %s: %d upstream calls created it, want at most one", name, n)
		}
	}
	for _, name := range append(slices.Clone(wantOnce), wantRestart) {
		if created[name] != 1 {
			t.Errorf("entity %s: %d upstream calls, want exactly one (it was approved)", name, created[name])
		}
	}
	for _, name := range neverCalled {
		if created[name] != 0 {
			t.Errorf("entity %s: %d upstream calls, but it was never approved", name, created[name])
		}
	}
	stored := readFile(t, up.memory)
	for _, name := range wantOnce {
		if n := strings.Count(stored, fmt.Sprintf(`"name":"%s"`, name)); n != 1 {
			t.Errorf("entity %s stored %d times, want once:\n%s", name, n, stored)
		}
	}
	for _, name := range neverCalled {
		if strings.Contains(stored, fmt.Sprintf(`"name":"%s"`, name)) {
			t.Errorf("entity %s stored, but it was never approved:\n%s", name, stored)
		}
	}
	if restarted := readFile(t, restartMemory); strings.Count(restarted, fmt.Sprintf(`"name":"%s"`, wantRestart)) != 1 {
		t.Errorf("entity %s not stored once by the restarted server's memory server:\n%s", wantRestart, restarted)
	}

	written := map[string]int{}
	for _, call := range readCalls(t, up.fsCalls) {
		if call.Name != "write_file" {
			continue
		}
		var args struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			t.Fatalf("write_file arguments %s: %v", call.Arguments, err)
		}
		written[filepath.Base(args.Path)]++
	}
	for file, want := range map[string]int{"approved.txt": 1, "keep.txt": 0, "never.txt": 0} {
		if written[file] != want {
			t.Errorf("write_file of %s: %d upstream calls, want %d", file, written[file], want)
		}
	}
}

// upstreamCall is one line upstream-tap.mjs wrote.
type upstreamCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func readCalls(t *testing.T, path string) []upstreamCall {
	t.Helper()
	var calls []upstreamCall
	for line := range strings.Lines(readFile(t, path)) {
		var c upstreamCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%s: line %q: %v", path, line, err)
		}
		calls = append(calls, c)
	}
	return calls
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// writeConfig writes the server's configuration on store: alice's key and
// eve's, of another tenant; the memory server (storing in up.memory) and
// the filesystem server (serving up.data) as stdio upstreams run by node
// from dir's node_modules, each behind upstream-tap.mjs, which counts its
// calls; the secret of the 2026-07-28 request states in stateSecretEnv.
// The file vouches for some of their tools as reads: memory's read_graph
// and search_nodes (not open_nodes, which the server annotates readOnlyHint
// all the same), the filesystem's list_directory, and its read_text_file
// pinned to the schema the server lists now; its get_file_info is pinned to
// a schema it does not have. Those reads and the ones of the globs below
// run at once; deletions are denied; memory's add_observations expires a
// second after it is proposed, within the hold; every other tool is a
// write, which the defaults ask of its requester, held for 2 s.
func writeConfig(t *testing.T, dir, store string, up upstreamFiles) string {
	t.Helper()
	mod := func(pkg string) string {
		return filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	}
	tap := filepath.Join(dir, "upstream-tap.mjs")
	pin := schemaPin(t, mod("server-filesystem"), up.data, "read_text_file")
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, roles: [agent]}
    - {key: key_eve, tenant: globex, actor: eve, roles: [agent, finance]}
worker: {poll_interval: 100ms, lease: 5s}
mcp:
  path: /mcp
  hold: 2s
  state_secret_env: %s
  servers:
    - name: memory
      command: [node, %q, %q, %q]
      env: {MEMORY_FILE_PATH: %q}
      read_only: [read_graph, search_nodes]
    - name: fs
      command: [node, %q, %q, %q, %q]
      read_only:
        - list_directory
        - {name: read_text_file, schema_sha256: %q}
        - {name: get_file_info, schema_sha256: %q}
policy:
  rules:
    - {match: "memory__read_*", effect: allow}
    - {match: "memory__search_*", effect: allow}
    - {match: "fs__read_*", effect: allow}
    - {match: "fs__list_*", effect: allow}
    - {match: "memory__delete_*", effect: deny}
    - {match: "memory__add_observations", ttl: 1s}
`, store, stateSecretEnv, tap, up.memoryCalls, mod("server-memory"), up.memory,
		tap, up.fsCalls, mod("server-filesystem"), up.data, pin, strings.Repeat("0", 64))
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// schemaPin is what an operator pins a tool's schema to: the
// mcpgateway.SchemaSHA256 of the input schema the filesystem server (the
// node module at server, serving data) lists for tool, read with the Go
// SDK's client as the gateway reads it.
func schemaPin(t *testing.T, server, data, tool string) string {
	t.Helper()
	ctx := t.Context()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pin", Version: "1"}, nil).Connect(ctx,
		&mcp.CommandTransport{Command: exec.CommandContext(ctx, "node", server, data)}, nil)
	if err != nil {
		t.Fatalf("start the filesystem server: %v", err)
	}
	defer cs.Close()
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tl.Name != tool {
			continue
		}
		schema, err := json.Marshal(tl.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		pin, err := mcpgateway.SchemaSHA256(schema)
		if err != nil {
			t.Fatal(err)
		}
		return pin
	}
	t.Fatalf("the filesystem server lists no %s", tool)
	return ""
}
