package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
)

// binary is the countersign command, built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	if os.Getenv(stdioUpstreamEnv) == "1" {
		// The test binary is the MCP tests' stdio upstream (mcp_test.go).
		os.Exit(stdioUpstream())
	}
	dir, err := os.MkdirTemp("", "countersign-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "countersign")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("build countersign: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// running is a `countersign serve` process.
type running struct {
	cmd  *exec.Cmd
	base string
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
	// read is closed once all the process's output is in out.
	read chan struct{}
}

func (s *running) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

func (s *running) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// startServer runs serve with args on a free port and waits until it listens.
func startServer(t *testing.T, args ...string) *running {
	t.Helper()
	s := &running{done: make(chan error, 1), read: make(chan struct{})}
	s.cmd = exec.Command(binary, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	s.cmd.Dir = t.TempDir()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = pw, pw
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	found := make(chan string, 1)
	go func() {
		defer close(s.read)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			_, _ = s.Write([]byte(line + "\n"))
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(40 * time.Second):
			_ = s.cmd.Process.Kill()
		}
	})
	select {
	case s.base = <-found:
	case err := <-s.done:
		t.Fatalf("serve exited: %v\n%s", err, s.output())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start\n%s", s.output())
	}
	return s
}

// quickstart returns the README's quickstart block.
func quickstart(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- quickstart -->\\s*```sh\\n(.*?)```\\s*<!-- /quickstart -->").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md has no quickstart block")
	}
	return string(m[1])
}

// runQuickstart runs the README's quickstart block twice on one server, as
// a reader who tries it again would: each run approves the proposal its own
// call made, and each ends with that proposal's outcome.
func runQuickstart(t *testing.T, s *running) {
	t.Helper()
	var ids []string
	for run := 1; run <= 2; run++ {
		got := runBlock(t, s, "quickstart", quickstart(t))
		for _, want := range []string{`"status":"pending"`, `"status":"applied"`, `"status":"succeeded"`, `"receipt":"rf_`} {
			if !strings.Contains(got, want) {
				t.Errorf("quickstart run %d lacks %s:\n%s", run, want, got)
			}
		}
		ids = append(ids, proposalIDs(got)...)
	}
	checkEachRunOwnProposal(t, "quickstart", ids)
}

// runBlock runs a README block against s and returns its output.
func runBlock(t *testing.T, s *running, name, block string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Env = append(os.Environ(), "COUNTERSIGN_URL="+s.base)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s block: %v\n%s\nserver:\n%s", name, err, out, s.output())
	}
	return string(out)
}

// proposalIDs lists the distinct proposal ids an output names, in order.
func proposalIDs(out string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`"(?:proposal_)?id":"(prp_[^"]+)"`).FindAllStringSubmatch(out, -1) {
		if !slices.Contains(ids, m[1]) {
			ids = append(ids, m[1])
		}
	}
	return ids
}

// checkEachRunOwnProposal checks that two runs of a block each dealt with
// one proposal of their own (the second did not approve the first's).
func checkEachRunOwnProposal(t *testing.T, name string, ids []string) {
	t.Helper()
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Errorf("%s run twice named the proposals %v: want one of its own each run", name, ids)
	}
}

func TestQuickstartOnSQLite(t *testing.T) {
	s := startServer(t, "--store", "sqlite:"+filepath.Join(t.TempDir(), "e2e.db"))
	runQuickstart(t, s)
	if !strings.Contains(s.output(), "ck_dev_alice") {
		t.Errorf("the demo did not print its API keys:\n%s", s.output())
	}
}

func TestQuickstartOnPostgreSQL(t *testing.T) {
	s := startServer(t, "--store", pgStoreURL(t))
	runQuickstart(t, s)
}

// pgStoreURL is a --store URL of the test server on a schema of t's own
// (dropped when t ends).
func pgStoreURL(t *testing.T) string {
	t.Helper()
	_, schema := pgtest.NewSchema(t)
	u, err := url.Parse(pgtest.PoolDSN(pgtest.DSN()))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	if !strings.HasPrefix(u.String(), "postgres") {
		t.Fatalf("unexpected DSN %s", u)
	}
	return u.String()
}

// cli runs the client and returns its output and exit code.
func cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("run %v: %v", args, err)
	return "", 0
}

func TestCLIDecisionsAndExitCodes(t *testing.T) {
	s := startServer(t, "--store", "sqlite:"+filepath.Join(t.TempDir(), "cli.db"))
	// A pending refund to decide.
	call := exec.Command("curl", "-s", "-X", "POST", s.base+"/v1/calls", "-H", "Authorization: Bearer ck_dev_alice",
		"-H", "Content-Type: application/json",
		"-d", `{"thread_id":"t1","tool_call_id":"c1","action":"payments.refund","input":{"amount":5,"customer":"c_1"}}`)
	out, err := call.CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	id := regexp.MustCompile(`"proposal_id":"(prp_[^"]+)"`).FindStringSubmatch(string(out))
	if id == nil {
		t.Fatalf("no proposal id in %s", out)
	}
	srv := []string{"--server", s.base}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"list as a table", append([]string{"proposals", "list", "--token", "ck_dev_bob"}, srv...), 0, "payments.refund"},
		{"list as JSON", append([]string{"proposals", "list", "--json", "--status", "pending", "--token", "ck_dev_bob"}, srv...), 0, `"proposals"`},
		{"show", append([]string{"proposals", "show", id[1], "--token", "ck_dev_bob"}, srv...), 0, "Refund 5 EUR to c_1"},
		{"unreachable", []string{"proposals", "list", "--token", "x", "--server", "http://127.0.0.1:1"}, exitUnreachable, "cannot reach"},
		{"bad token", append([]string{"proposals", "list", "--token", "nope"}, srv...), exitUnauth, "401"},
		{"not an approver", append([]string{"approve", id[1], "--token", "ck_dev_alice"}, srv...), exitForbidden, "403"},
		{"another tenant", append([]string{"approve", id[1], "--token", "ck_dev_eve"}, srv...), exitForbidden, "403"},
		{"not found", append([]string{"proposals", "show", "prp_nope", "--token", "ck_dev_bob"}, srv...), exitNotFound, "404"},
		// A dot segment would be cleaned out of the path, naming another
		// resource (GET /v1/proposals, the list): refused before any request.
		{"dot segment", append([]string{"proposals", "show", "..", "--token", "ck_dev_bob"}, srv...), exitNotFound, `no proposal ".."`},
		{"dot segment approve", append([]string{"approve", ".", "--token", "ck_dev_bob"}, srv...), exitNotFound, `no proposal "."`},
		{"approve", append([]string{"approve", id[1], "--token", "ck_dev_bob", "--reason", "ok"}, srv...), 0, "applied"},
		// An independent approval is the worker's: no word of the agent.
		{"approve again, independent", append([]string{"approve", id[1], "--json", "--token", "ck_dev_bob"}, srv...), 0, `"status": "unchanged"`},
		{"approve again", append([]string{"approve", id[1], "--token", "ck_dev_carol"}, srv...), 0, "unchanged"},
		{"reject after approval", append([]string{"reject", id[1], "--token", "ck_dev_carol"}, srv...), exitRefused, "conflict"},
		{"resolve from the wrong status", append([]string{"resolve", id[1], "--outcome", "failed", "--note", "n", "--token", "ck_dev_bob"}, srv...), exitRefused, "409"},
		{"usage", []string{"approve"}, exitUsage, "arg"},
		{"bad remember", append([]string{"approve", id[1], "--remember", "forever", "--token", "ck_dev_bob"}, srv...), exitUsage, "remember"},
		{"version", []string{"version"}, 0, "countersign"},
	}
	for _, tc := range cases {
		out, code := cli(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, output %q; want exit %d and %q", tc.name, code, out, tc.code, tc.want)
		}
	}
	// The CLI's decision is recorded via "cli".
	out2, _ := cli(t, append([]string{"proposals", "show", id[1], "--json", "--token", "ck_dev_bob"}, srv...)...)
	if !strings.Contains(out2, `"via": "cli"`) {
		t.Errorf("decision not recorded via cli:\n%s", out2)
	}
	// A wait-mode call whose caller stopped waiting runs only when it calls
	// again: the approval says so (an independent one above is the worker's).
	call = exec.Command("curl", "-s", "-X", "POST", s.base+"/v1/calls", "-H", "Authorization: Bearer ck_dev_alice",
		"-H", "Content-Type: application/json",
		"-d", `{"thread_id":"t1","tool_call_id":"c2","action":"payments.refund","input":{"amount":6,"customer":"c_2"},"mode":"wait","wait_seconds":0}`)
	if out, err = call.CombinedOutput(); err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	waitID := regexp.MustCompile(`"proposal_id":"(prp_[^"]+)"`).FindStringSubmatch(string(out))
	if waitID == nil {
		t.Fatalf("no proposal id in %s", out)
	}
	out3, code := cli(t, append([]string{"approve", waitID[1], "--token", "ck_dev_bob"}, srv...)...)
	if want := "applied: your decision was recorded (proposal " + waitID[1] + " is now approved)\nIt runs only when alice's agent calls again, before "; code != 0 || !strings.Contains(out3, want) {
		t.Errorf("approving a wait call nobody waits on: exit %d, %q; want %q", code, out3, want)
	}
	if out4, _ := cli(t, append([]string{"approve", waitID[1], "--json", "--token", "ck_dev_bob"}, srv...)...); !strings.Contains(out4, `"awaiting_caller": true`) {
		t.Errorf("approve --json lacks awaiting_caller:\n%s", out4)
	}
}

func TestConfigValidate(t *testing.T) {
	// validate builds what serve builds: the agents' providers need their
	// keys, as serve's start would.
	t.Setenv("OPENAI_API_KEY", "sk-test-validate")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-validate")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("listen: 127.0.0.1:8080\npolicy:\n  rules:\n    - match: \"x.*\"\n      effect: maybe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := cli(t, "config", "validate", bad)
	if code != exitUsage || !strings.Contains(out, "bad.yaml:5") {
		t.Fatalf("validate bad: exit %d, %q; want exit 2 naming bad.yaml:5", code, out)
	}
	pool := filepath.Join(dir, "pool.yaml")
	if err := os.WriteFile(pool, []byte("listen: 127.0.0.1:8080\npostgres:\n  max_conns: -4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = cli(t, "config", "validate", pool)
	if code != exitUsage || !strings.Contains(out, "pool.yaml:3: postgres.max_conns: -4: must be positive") {
		t.Fatalf("validate pool: exit %d, %q; want exit 2 naming pool.yaml:3 and postgres.max_conns", code, out)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("listen: 127.0.0.1:9000\npostgres: {max_conns: 16}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, "config", "validate", good); code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("validate good: exit %d, %q", code, out)
	}
	// The agents and text decisions of Part 2, good and bad.
	// Its actions call a backend: validate reads the webhook secret they
	// sign with, unless told to check the file alone.
	if out, code := cliEnv(t, []string{"COUNTERSIGN_WEBHOOK_SECRET=whsec-validate"}, "config", "validate", "../../config/testdata/agents.yaml"); code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("validate agents.yaml: exit %d, %q", code, out)
	}
	if out, code := cliEnv(t, []string{"COUNTERSIGN_WEBHOOK_SECRET="}, "config", "validate", "--no-env", "../../config/testdata/agents.yaml"); code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("validate --no-env agents.yaml: exit %d, %q", code, out)
	}
	agents := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(agents, []byte("default_agent: nobody\ntext_decisions: {language: fr}\nagents:\n  - name: a\n    model: {provider: scripted, rules: [{match: '(', say: hi}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = cli(t, "config", "validate", agents)
	for _, want := range []string{"agents.yaml:1: default_agent", "agents.yaml:2: text_decisions.language", "agents.yaml:5: agents[0].model.rules[0].match"} {
		if code != exitUsage || !strings.Contains(out, want) {
			t.Errorf("validate agents: exit %d, %q; want exit 2 and %q", code, out, want)
		}
	}
}

// TestConfigValidateWarnsOfKinds: keys without a kind, and JWTs without
// default_kind, are valid but warned of, naming tenant, actor and the key's
// fingerprint, never the key (docs/api.md Part 3); kinds given explicitly, or a
// bad kind, are not warnings.
func TestConfigValidateWarnsOfKinds(t *testing.T) {
	out, code := cli(t, "config", "validate", "--no-env", "../../config/testdata/example.yaml")
	if code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("validate example.yaml: exit %d, %q", code, out)
	}
	for _, want := range []string{
		"warning: auth.api_keys[0] (../../config/testdata/example.yaml:7): no kind, so taken as human: tenant acme, actor alice, key sha256 c4e90a93…",
		"warning: auth.jwt (../../config/testdata/example.yaml:9): no default_kind",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate example.yaml: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "ck_dev_alice") {
		t.Errorf("a warning prints the key:\n%s", out)
	}
	dir := t.TempDir()
	kinds := filepath.Join(dir, "kinds.yaml")
	if err := os.WriteFile(kinds, []byte("auth:\n  api_keys:\n    - {key: k_agent, tenant: acme, actor: alice, kind: agent}\n    - {key: k_alice, tenant: acme, actor: alice, kind: human}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, "config", "validate", kinds); code != 0 || strings.Contains(out, "warning") {
		t.Errorf("validate kinds.yaml: exit %d, %q; want valid without warnings", code, out)
	}
	bad := filepath.Join(dir, "badkind.yaml")
	if err := os.WriteFile(bad, []byte("auth:\n  api_keys:\n    - {key: k_x, tenant: acme, actor: alice, kind: robot}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, "config", "validate", bad); code != exitUsage || !strings.Contains(out, "auth.api_keys[0].kind") {
		t.Errorf("validate badkind.yaml: exit %d, %q; want exit 2 naming auth.api_keys[0].kind", code, out)
	}
}

func TestGracefulShutdown(t *testing.T) {
	s := startServer(t, "--store", "sqlite:"+filepath.Join(t.TempDir(), "stop.db"))
	// A long-poll in flight when SIGTERM arrives still gets its answer.
	poll := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", s.base+"/v1/calls",
		"-H", "Authorization: Bearer ck_dev_alice", "-H", "Content-Type: application/json",
		"-d", `{"thread_id":"t9","tool_call_id":"c9","action":"email.send","input":{"to":"a@b.c","subject":"hi"},"wait_seconds":2}`)
	var pollOut bytes.Buffer
	poll.Stdout = &pollOut
	if err := poll.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("serve exited with %v\n%s", err, s.output())
		}
	case <-ctx.Done():
		t.Fatal("serve did not stop after SIGTERM")
	}
	_ = poll.Wait()
	if pollOut.String() != "200" {
		t.Fatalf("in-flight long-poll answered %q, want 200", pollOut.String())
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	s.done <- nil // for the cleanup
}

// TestDemoCommandsAsPrinted runs the commands serve prints at start, as
// printed.
func TestDemoCommandsAsPrinted(t *testing.T) {
	s := startServer(t, "--store", "sqlite:"+filepath.Join(t.TempDir(), "demo.db"))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.output(), "countersign proposals list") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := s.output()
	i := strings.Index(out, "Try it (bash):\n")
	if i < 0 {
		t.Fatalf("no commands printed:\n%s", out)
	}
	var script []string
	for _, line := range strings.Split(out[i+len("Try it (bash):\n"):], "\n") {
		if strings.TrimSpace(line) == "" {
			break
		}
		script = append(script, strings.TrimPrefix(line, "  "))
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", strings.Join(script, "\n"))
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("printed commands failed: %v\n%s\n%s", err, strings.Join(script, "\n"), got)
	}
	for _, want := range []string{`"status":"applied"`, "payments.refund"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("output lacks %s:\n%s", want, got)
		}
	}
}

// readmeBlock returns the README's shell block between <!-- name --> and
// <!-- /name -->.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- " + name + " -->\\s*```sh\\n(.*?)```\\s*<!-- /" + name + " -->").FindSubmatch(b)
	if m == nil {
		t.Fatalf("README.md has no %s block", name)
	}
	return string(m[1])
}

// TestConditionsQuickstart runs the README's conditions block against the
// demo: a refund over 1,000 EUR records the rule that asked, waits after
// one approval, and runs after the second.
func TestConditionsQuickstart(t *testing.T) {
	s := startServer(t, "--store", "sqlite:"+filepath.Join(t.TempDir(), "conditions.db"))
	var ids []string
	for run := 1; run <= 2; run++ {
		out := runBlock(t, s, "conditions", readmeBlock(t, "conditions"))
		checkConditionsAnswers(t, out)
		ids = append(ids, proposalIDs(out)...)
	}
	checkEachRunOwnProposal(t, "conditions", ids)
}

func checkConditionsAnswers(t *testing.T, out string) {
	t.Helper()
	var answers []string // the four answers, one a line
	for l := range strings.Lines(string(out)) {
		if l = strings.TrimSpace(l); l != "" {
			answers = append(answers, l)
		}
	}
	if len(answers) != 4 {
		t.Fatalf("conditions block: %d answers, want 4 (call, two approvals, proposal):\n%s", len(answers), out)
	}
	for i, wants := range [][]string{
		{`"status":"pending"`, `"quorum":2`, `"rule":{"match":"payments.refund","when":"input.amount \u003e 1000"}`},
		{`"status":"pending"`, `"actor":"bob"`, `"status":"applied"}`}, // one of two: still waiting
		{`"status":"approved"`, `"actor":"carol"`, `"status":"applied"}`},
		{`"status":"succeeded"`, `"receipt":"rf_`},
	} {
		for _, want := range wants {
			if !strings.Contains(answers[i], want) {
				t.Errorf("answer %d lacks %s:\n%s", i+1, want, answers[i])
			}
		}
	}
}

// TestChatQuickstart runs the README's chat block against the demo: the
// scripted agent's call is a pending proposal, bob's "yes" decides
// it by text, and the outcome message reaches the thread.
func TestChatQuickstart(t *testing.T) {
	s := startServer(t, "--store", "sqlite:"+filepath.Join(t.TempDir(), "chat.db"))
	// Twice in the same thread, as a reader who tries it again would: the
	// second "yes" decides the second run's call.
	for run := 1; run <= 2; run++ {
		got := runBlock(t, s, "chat", readmeBlock(t, "chat"))
		for _, want := range []string{`"status":"finished"`, `"tool_calls":[{`, `"status":"pending"`, // the run and the call's receipt
			`"status":"applied"},"text":"Proposal approved and queued to run."`, `"via":"text"`, // bob's yes
			`"role":"assistant"`, `"receipt":"rf_`} { // the outcome message
			if !strings.Contains(got, want) {
				t.Errorf("chat run %d lacks %s:\n%s", run, want, got)
			}
		}
	}
}

// TestHelpPrintsNoSecret: the token from COUNTERSIGN_TOKEN is read when a
// command runs, so --help, which prints flags' defaults, and errors never
// show it.
func TestHelpPrintsNoSecret(t *testing.T) {
	const secret = "ck_secret_do_not_print_4242"
	for _, args := range [][]string{
		{"proposals", "list", "--help"}, {"approve", "--help"}, {"mcp", "--help"}, {"grants", "list", "--help"},
		{"audit", "verify", "--help"}, {"chat", "--help"}, {"--help"},
		// An error: a server that cannot be reached.
		{"proposals", "list", "--server", "http://127.0.0.1:1"},
	} {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "COUNTERSIGN_TOKEN="+secret)
		out, _ := cmd.CombinedOutput()
		if strings.Contains(string(out), secret) {
			t.Errorf("countersign %s prints the token:\n%s", strings.Join(args, " "), out)
		}
		if len(out) == 0 {
			t.Errorf("countersign %s printed nothing", strings.Join(args, " "))
		}
	}
}

// TestValidateRefusesWhatServeRefuses: config validate builds what serve
// builds before it binds (dryRun), so a file serve refuses at start is a
// validate error too, with the same reason; before, validate read the file
// alone and passed these.
func TestValidateRefusesWhatServeRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte(`{"keys": [{"kty": "RSA", "n": "!!", "e": "AQAB"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ file, want string }{
		"a JWKS file that is not there":  {"jwt: {issuer: \"https://x\", audience: cs, jwks_file: " + filepath.Join(dir, "none.json") + ", default_kind: human}", "jwks_file"},
		"a JWKS file with no usable key": {"jwt: {issuer: \"https://x\", audience: cs, jwks_file: " + garbage + ", default_kind: human}", "jwks"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "c.yaml")
			yaml := "store: sqlite:" + filepath.Join(filepath.Dir(path), "c.db") + "\nauth:\n  " + c.file + "\n"
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			out, code := cli(t, "serve", "--config", path, "--listen", "127.0.0.1:0")
			if code != exitUsage || !strings.Contains(out, c.want) {
				t.Fatalf("serve: exit %d, %q; want exit %d naming %s", code, out, exitUsage, c.want)
			}
			vout, vcode := cli(t, "config", "validate", path)
			if vcode != exitUsage || !strings.Contains(vout, c.want) {
				t.Errorf("validate: exit %d, %q; want exit %d naming %s, as serve refused it", vcode, vout, exitUsage, c.want)
			}
		})
	}
}
