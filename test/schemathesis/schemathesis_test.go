// Package schemathesis fuzzes the HTTP API with Schemathesis (from PyPI,
// pinned with hashes in requirements.lock, installed into
// .venv-schemathesis by `make schemathesis-env`) against /openapi.json on a
// real `countersign serve`: no 5xx, every answer's status, content type and
// body as the document says, for each kind of credential. `make
// test-schemathesis` runs it short (part of `make test`), `make fuzz` long;
// docs/api-testing.md says what it covers and what it cannot reach.
package schemathesis

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/servetest"
)

// config is the server's: SQLite in the test's folder, three credentials
// (a human approver, an agent, an operator) and two caller-executed
// actions, so that nothing leaves the machine. payments.* asks, in
// independent mode, so that a fuzzed call answers at once rather than
// long-polling for a decision nobody makes.
const config = `store: sqlite:countersign.db
auto_migrate: true
auth:
  api_keys:
    - {key: ck_st_approver, tenant: acme, actor: alice, kind: human, roles: [finance]}
    - {key: ck_st_agent, tenant: acme, actor: alice, kind: agent}
    - {key: ck_st_operator, tenant: acme, actor: olga, kind: human, roles: [operator]}
worker: {poll_interval: 100ms, lease: 2s, max_attempts: 3}
metrics: {require_role: operator}
policy:
  rules:
    - {match: "payments.*", effect: ask, approvers: ["role:finance"], mode: independent}
    - {match: "mail.*", effect: allow}
actions:
  - name: payments.refund
    description: Refund a payment
    input_schema:
      type: object
      required: [amount, customer]
      additionalProperties: false
      properties: {amount: {type: number, exclusiveMinimum: 0}, customer: {type: string}}
    confirmation: {title: "Refund {amount} EUR to {customer}", verb: Refund}
    execute: {by: caller}
  - name: mail.send
    execute: {by: caller}
`

// credentials are the bearer tokens each run fuzzes the API with.
var credentials = []struct{ name, token string }{
	{"approver", "ck_st_approver"},
	{"agent", "ck_st_agent"},
	{"operator", "ck_st_operator"},
}

// checks are what every answer is judged by.
const checks = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"

// profile bounds a run: examples per operation and seconds per credential.
type profile struct {
	maxExamples int
	maxTime     int
}

var profiles = map[string]profile{
	// short: part of make test, about a minute a credential on the 2-core
	// machine.
	"short": {maxExamples: 10, maxTime: 60},
	// long: make fuzz, ten minutes a credential.
	"long": {maxExamples: 500, maxTime: 600},
}

// seed makes a run repeatable: the same seed draws the same cases
// (CS_SCHEMATHESIS_SEED overrides it, to explore).
const seed = 36

// summary is Schemathesis' closing line, e.g.
// "==== 3 failures, 1 error, 2 warnings in 60.02s ====" or "==== 812 passed in 59.9s ====".
var (
	closing   = regexp.MustCompile(`(?m)^=+ (.*) in [0-9.]+s =+$`)
	generated = regexp.MustCompile(`(?m)^\s*([0-9]+) generated, `)
)

// TestSchemathesis runs Schemathesis against a real server once per
// credential and fails on any failure or error it reports, or when it ran
// no test case. It runs only under make test-schemathesis or make fuzz
// (CS_SCHEMATHESIS=short or long): go test ./... has no Python environment
// to run it with, and would run it twice.
func TestSchemathesis(t *testing.T) {
	name := os.Getenv("CS_SCHEMATHESIS")
	if name == "" {
		t.Skip("CS_SCHEMATHESIS is not set: make test-schemathesis (short) or make fuzz (long) runs this")
	}
	p, ok := profiles[name]
	if !ok {
		t.Fatalf("CS_SCHEMATHESIS=%q: want short or long", name)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(root, ".venv-schemathesis", "bin", "schemathesis")
	if _, err := os.Stat(st); err != nil {
		t.Fatalf("%s: %v (make schemathesis-env builds it)", st, err)
	}
	runSeed := seed
	if s := os.Getenv("CS_SCHEMATHESIS_SEED"); s != "" {
		if runSeed, err = strconv.Atoi(s); err != nil {
			t.Fatalf("CS_SCHEMATHESIS_SEED=%q: %v", s, err)
		}
	}

	bin := servetest.Build(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "countersign.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	base := servetest.Start(t, bin, cfg)
	seedData(t, base)

	reached := map[string]bool{}
	for _, c := range credentials {
		t.Run(c.name, func(t *testing.T) {
			reports := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.maxTime+240)*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, st, "run", base+"/openapi.json",
				"--header", "Authorization: Bearer "+c.token,
				"--checks", checks,
				"--max-examples", strconv.Itoa(p.maxExamples),
				"--max-time", strconv.Itoa(p.maxTime),
				"--seed", strconv.Itoa(runSeed),
				// One worker: Hypothesis parses strategies' source with
				// ast in each thread, and CPython 3.11's parser is not
				// safe across threads ("AST constructor recursion depth
				// mismatch"), which fails a run for no fault of the API.
				"--workers", "1",
				// No stateful phase: its links inferred from the answers
				// fill a value they do not find with the empty string, and
				// an empty path segment addresses another route
				// (/v1/threads/t/runs//cancel is cleaned to the run read,
				// which answers POST with 405): a finding of the tool, not
				// of the API (docs/api-testing.md).
				"--phases", "examples,coverage,fuzzing",
				// Above the longest long-poll (wait_seconds, at most 60).
				"--request-timeout", "75",
				// The live event stream never ends by itself; its own
				// tests cover it (docs/api-testing.md).
				"--exclude-path-regex", "^/v1/events$",
				"--report", "har",
				"--report-har-path", filepath.Join(reports, "run.har"),
				"--no-color",
			)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "SCHEMATHESIS_HOOKS=", "PYTHONDONTWRITEBYTECODE=1")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			runErr := cmd.Run()
			text := out.String()
			reach(t, filepath.Join(reports, "run.har"), reached)
			m := closing.FindStringSubmatch(text)
			g := generated.FindStringSubmatch(text)
			switch {
			case ctx.Err() != nil:
				t.Fatalf("schemathesis ran past its time limit:\n%s", text)
			case m == nil || g == nil:
				t.Fatalf("schemathesis printed no summary (%v):\n%s", runErr, text)
			case g[1] == "0":
				t.Fatalf("schemathesis generated no test case:\n%s", text)
			case runErr != nil:
				t.Fatalf("schemathesis: %s (%v):\n%s", m[1], runErr, text)
			}
			t.Logf("schemathesis as the %s: %s test cases, %s", c.name, g[1], m[1])
		})
	}
	// What no run reached, for docs/api-testing.md's table of statuses
	// reached and explained.
	for _, op := range unreached(t, filepath.Join(root, "server", "openapi.json"), reached) {
		t.Logf("not reached: %s", op)
	}
}

// reach adds the "METHOD /path STATUS" of every answer in a HAR file to
// reached, with the path as its URL (templates are matched later).
func reach(t *testing.T, har string, reached map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(har)
	if err != nil {
		t.Errorf("schemathesis' HAR report: %v", err)
		return
	}
	var doc struct {
		Log struct {
			Entries []struct {
				Request struct {
					Method string `json:"method"`
					URL    string `json:"url"`
				} `json:"request"`
				Response struct {
					Status int `json:"status"`
				} `json:"response"`
			} `json:"entries"`
		} `json:"log"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Errorf("schemathesis' HAR report: %v", err)
		return
	}
	for _, e := range doc.Log.Entries {
		u, err := url.Parse(e.Request.URL)
		if err != nil {
			continue
		}
		reached[e.Request.Method+" "+u.EscapedPath()+" "+strconv.Itoa(e.Response.Status)] = true
	}
}

// unreached lists the documented "METHOD /path STATUS" that no answer in
// reached matched, sorted.
func unreached(t *testing.T, document string, reached map[string]bool) []string {
	t.Helper()
	b, err := os.ReadFile(document)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\\\{[^/]*\\\}`)
	var missing []string
	for path, ops := range doc.Paths {
		re := regexp.MustCompile("^" + param.ReplaceAllString(regexp.QuoteMeta(path), "[^/]+") + "$")
		for method, raw := range ops {
			var op struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if json.Unmarshal(raw, &op) != nil || op.Responses == nil {
				continue
			}
			for status := range op.Responses {
				found := false
				for k := range reached {
					f := strings.Fields(k)
					if f[0] == strings.ToUpper(method) && f[2] == status && re.MatchString(f[1]) {
						found = true
						break
					}
				}
				if !found {
					missing = append(missing, strings.ToUpper(method)+" "+path+" "+status)
				}
			}
		}
	}
	sort.Strings(missing)
	return missing
}

// seedData gives the fuzzer something to find: a pending proposal and a
// settled one, in a thread of the agent's, so that the listings and the
// inferred links between operations have real ids to follow.
func seedData(t *testing.T, base string) {
	t.Helper()
	call := func(toolCall, action string, input map[string]any) map[string]any {
		body, err := json.Marshal(map[string]any{
			"thread_id": "seed", "run_id": "r1", "tool_call_id": toolCall,
			"action": action, "input": input,
		})
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("POST", base+"/v1/calls", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer ck_st_agent")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("seeding %s: status %d, %v: %v", action, resp.StatusCode, err, out)
		}
		return out
	}
	if got := call("c1", "payments.refund", map[string]any{"amount": 40, "customer": "cus_1"}); got["status"] != "pending" {
		t.Fatalf("seeding a refund: %v, want pending", got)
	}
	if got := call("c2", "mail.send", map[string]any{"to": "x"}); got["status"] == nil {
		t.Fatalf("seeding a mail: %v", got)
	}
}
