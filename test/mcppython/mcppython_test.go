package mcppython

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/servetest"
)

// stateSecretEnv names the variable that holds the secret signing the
// gateway's 2026-07-28 request states (mcp.state_secret_env).
const stateSecretEnv = "COUNTERSIGN_MCP_STATE_SECRET"

// TestPythonSDKClient runs the pytest tests (test_gateway.py) against the
// gateway on each store, then checks what reached the upstream servers.
func TestPythonSDKClient(t *testing.T) {
	if os.Getenv("CS_MCP_PYTHON") == "" {
		t.Skip("CS_MCP_PYTHON is not set: make test-mcp-python runs this")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(root, ".venv-mcp-python", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v (make mcp-python-env builds it)", python, err)
		}
		t.Skipf("%s: %v (make mcp-python-env builds it)", python, err)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	servers := nodetest.Need(t, "../mcp", "this test runs the reference MCP servers from test/mcp's node_modules")
	bin := servetest.Build(t)
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"SQLite", func(t *testing.T) string { return servetest.SQLiteStore(t) }},
		{"PostgreSQL", func(t *testing.T) string { return servetest.PostgresStore(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			f := files{
				data:     filepath.Join(tmp, "data"),
				memory:   filepath.Join(tmp, "memory.jsonl"),
				calls:    filepath.Join(tmp, "upstream-calls.jsonl"),
				manifest: filepath.Join(tmp, "manifest.jsonl"),
			}
			if err := os.Mkdir(f.data, 0o755); err != nil {
				t.Fatal(err)
			}
			secret := make([]byte, 32)
			_, _ = rand.Read(secret)
			secretEnv := stateSecretEnv + "=" + hex.EncodeToString(secret)
			config := writeConfig(t, tc.store(t), python, here, servers, f)
			base := servetest.Start(t, bin, config, secretEnv)
			servetest.WaitReady(t, base)
			runPytest(t, python, here, 6*time.Minute,
				"COUNTERSIGN_URL="+base, "COUNTERSIGN_BIN="+bin, "COUNTERSIGN_CONFIG="+config, secretEnv,
				"COUNTERSIGN_STATE_SECRET_ENV="+stateSecretEnv,
				"COUNTERSIGN_FS_DIR="+f.data, "COUNTERSIGN_MEMORY_FILE="+f.memory,
				"COUNTERSIGN_UPSTREAM_CALLS="+f.calls, "COUNTERSIGN_MANIFEST="+f.manifest)
			checkUpstreams(t, f)
		})
	}
}

// files are where a run's upstreams and tests leave what the Go test
// checks afterwards.
type files struct {
	data     string // the filesystem server's folder
	memory   string // the memory server's file
	calls    string // upstream_log.py's record of the tools/call requests
	manifest string // what the tests wrote: each name, and whether its write must run
}

// writeConfig writes the server's configuration on store: alice's key,
// a human's (the API keys' default kind, spelled out), so that the gateway
// may ask her in-band; the memory server (storing in files.memory) and the
// filesystem server (serving files.data) as stdio upstreams, each run by
// node from servers' node_modules behind upstream_log.py (by python, from
// dir). The file vouches for the tools the tests read with. Those reads run
// at once; deletions are denied; create_directory's proposals expire after
// 1 s, before the 2 s hold ends, so that a call of it answers expired; every
// other tool is a write, which the defaults ask of its requester, on every
// channel.
func writeConfig(t *testing.T, store, python, dir, servers string, f files) string {
	t.Helper()
	mod := func(pkg string) string {
		return filepath.Join(servers, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	}
	shim := filepath.Join(dir, "upstream_log.py")
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, kind: human, roles: [agent]}
worker: {poll_interval: 100ms, lease: 5s}
mcp:
  path: /mcp
  hold: 2s
  state_secret_env: %s
  servers:
    - name: memory
      command: [%q, %q, %q, "--", node, %q]
      env: {MEMORY_FILE_PATH: %q, COUNTERSIGN_UPSTREAM: memory}
      read_only: [read_graph, search_nodes]
    - name: fs
      command: [%q, %q, %q, "--", node, %q, %q]
      env: {COUNTERSIGN_UPSTREAM: fs}
      read_only: [list_directory, read_text_file]
policy:
  rules:
    - {match: "memory__read_*", effect: allow}
    - {match: "memory__search_*", effect: allow}
    - {match: "fs__read_*", effect: allow}
    - {match: "fs__list_*", effect: allow}
    - {match: "memory__delete_*", effect: deny}
    - {match: "fs__create_directory", ttl: 1s}
`, store, stateSecretEnv,
		python, shim, f.calls, mod("server-memory"), f.memory,
		python, shim, f.calls, mod("server-filesystem"), f.data)
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// pytestSummary is pytest's closing line, e.g. "==== 31 passed in 80.12s
// (0:01:20) ====" or "==== 1 failed, 30 passed, 2 warnings in 81.0s ====".
var (
	pytestSummary = regexp.MustCompile(`(?m)^=+ (.*) in [0-9.]+s( \([0-9:]+\))? =+$`)
	// allPassed is a summary of passes only (warnings aside): no
	// failures, errors, skips or expected failures.
	allPassed = regexp.MustCompile(`^([0-9]+) passed(, [0-9]+ warnings?)?$`)
)

// runPytest runs pytest from python's environment on dir's tests with env,
// within timeout, and fails t unless at least one test ran and every one
// passed.
func runPytest(t *testing.T, python, dir string, timeout time.Duration, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rfEsx",
		"--timeout", "120", "--durations", "5", dir)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), env...)
	// pytest starts countersign mcp processes, which start node servers:
	// on the deadline the whole group is killed, so that none keeps the
	// output open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	m := pytestSummary.FindAllStringSubmatch(string(out), -1)
	switch {
	case ctx.Err() != nil:
		t.Fatalf("pytest ran past %v:\n%s", timeout, out)
	case len(m) == 0:
		t.Fatalf("pytest printed no summary (%v):\n%s", err, out)
	case err != nil || !allPassed.MatchString(m[len(m)-1][1]):
		t.Fatalf("pytest: %s (%v):\n%s", m[len(m)-1][1], err, out)
	}
	t.Logf("pytest: %s in %.1f s\n%s", m[len(m)-1][1], time.Since(start).Seconds(), out)
}

// upstreamCall is one record of upstream_log.py.
type upstreamCall struct {
	Upstream    string          `json:"upstream"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	OperationID string          `json:"operation_id"`
}

// names are the entity names, or the base names of the paths, that a
// write call of the memory or filesystem server makes.
func (c upstreamCall) names() []string {
	var args struct {
		Entities []struct {
			Name string `json:"name"`
		} `json:"entities"`
		Path string `json:"path"`
	}
	_ = json.Unmarshal(c.Arguments, &args)
	var out []string
	for _, e := range args.Entities {
		out = append(out, e.Name)
	}
	if args.Path != "" {
		out = append(out, filepath.Base(args.Path))
	}
	return out
}

// planned is one line of the tests' manifest: a name one of them wrote
// with (an entity of the memory server, a file or folder of the filesystem
// server), and whether its write must have run exactly once ("once") or
// never ("never").
type planned struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	Expect string `json:"expect"`
	Test   string `json:"test"`
}

// checkUpstreams checks what reached the upstream servers against the
// tests' manifest: no operation id twice; each name the tests approved
// written by exactly one upstream call, and there once (an entity in the
// memory server's file, a path in the filesystem server's folder); each
// name they did not approve never written and not there.
func checkUpstreams(t *testing.T, f files) {
	t.Helper()
	var calls []upstreamCall
	readLines(t, f.calls, func(line []byte) {
		var c upstreamCall
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("%s: %q: %v", f.calls, line, err)
		}
		calls = append(calls, c)
	})
	var plan []planned
	readLines(t, f.manifest, func(line []byte) {
		var p planned
		if err := json.Unmarshal(line, &p); err != nil {
			t.Fatalf("%s: %q: %v", f.manifest, line, err)
		}
		plan = append(plan, p)
	})

	byOperation := map[string]int{}
	byName := map[string]int{}
	for _, c := range calls {
		if c.OperationID != "" {
			byOperation[c.OperationID]++
		}
		for _, n := range c.names() {
			byName[c.Upstream+"/"+n]++
		}
	}
	for op, n := range byOperation {
		if n > 1 {
			t.Errorf("operation %s reached its upstream %d times, want at most once", op, n)
		}
	}

	memory, err := os.ReadFile(f.memory)
	if err != nil {
		t.Fatalf("the memory server's file: %v", err)
	}
	counts := map[string]int{}
	for _, p := range plan {
		counts[p.Expect]++
		calls := byName[p.Server+"/"+p.Name]
		var stored int
		switch p.Server {
		case "memory":
			stored = bytes.Count(memory, []byte(fmt.Sprintf(`"name":%q`, p.Name)))
		case "fs":
			if _, err := os.Stat(filepath.Join(f.data, p.Name)); err == nil {
				stored = 1
			}
		default:
			t.Fatalf("manifest: %+v names no server the test knows", p)
		}
		switch p.Expect {
		case "once":
			if calls != 1 || stored != 1 {
				t.Errorf("%s (%s): %d upstream calls, stored %d times; want once each", p.Name, p.Test, calls, stored)
			}
		case "never":
			if calls != 0 || stored != 0 {
				t.Errorf("%s (%s): %d upstream calls, stored %d times; want none", p.Name, p.Test, calls, stored)
			}
		default:
			t.Fatalf("manifest: %+v: want expect once or never", p)
		}
	}
	// Not vacuous: the tests approved and refused writes of both servers.
	if counts["once"] < 4 || counts["never"] < 4 {
		t.Fatalf("the manifest holds %d approved and %d refused writes, want at least 4 of each", counts["once"], counts["never"])
	}
	t.Logf("upstreams: %d tools/call records, %d operations; %d writes ran once as approved, %d never ran",
		len(calls), len(byOperation), counts["once"], counts["never"])
}

// readLines calls each with every non-empty line of the file at path.
func readLines(t *testing.T, path string, each func([]byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			each(line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
