package webhook_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/testlog"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/webhook"
)

// The contract users read: docs/api.md, "Verifying a signature".
const contractDoc = "../docs/api.md"

// docBlock returns the fenced code block of docs/api.md between the marker
// comments <!-- name --> and <!-- /name -->.
func docBlock(t *testing.T, name string) string {
	t.Helper()
	doc, err := os.ReadFile(contractDoc)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(name) + " -->\\s*```[a-z]*\\n(.*?)```\\s*<!-- /" + regexp.QuoteMeta(name) + " -->")
	m := re.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("%s has no code block between <!-- %s --> and <!-- /%s -->", contractDoc, name, name)
	}
	return string(m[1])
}

// TestDocumentedSignatureVector checks the request docs/api.md gives to
// check an implementation against: Sign must produce its header.
func TestDocumentedSignatureVector(t *testing.T) {
	t.Parallel()
	fields := map[string]string{}
	for line := range strings.SplitSeq(docBlock(t, "webhook-signature-vector"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	unix, _, _ := strings.Cut(fields["sent at"], " ")
	sec, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		t.Fatalf("sent at %q: %v", fields["sent at"], err)
	}
	if got := time.Unix(sec, 0).UTC().Format(time.RFC3339); !strings.Contains(fields["sent at"], "("+got+")") {
		t.Errorf("sent at %q: %d is %s", fields["sent at"], sec, got)
	}
	got := webhook.Sign([]byte(fields["secret"]), time.Unix(sec, 0), []byte(fields["body"]))
	if want := fields["Countersign-Signature"]; got != want || want == "" {
		t.Fatalf("docs/api.md says the header is %q; Sign makes %q", want, got)
	}
}

// TestDocumentedVerifiers runs each backend docs/api.md publishes (Go,
// TypeScript, Python), exactly as written there, against requests signed by
// this package: an execute sent by a webhook action through the engine must
// succeed with the backend's receipt, one signed with another secret must
// fail, and every tampered, stale or malformed signature must be refused
// with 401, each as Verify decides it. A language whose toolchain is not on
// PATH (for TypeScript: or clients/typescript's npm packages are not
// installed) skips, except in CI (CI set), where that fails.
func TestDocumentedVerifiers(t *testing.T) {
	t.Parallel()
	for _, lang := range []struct {
		name  string
		build func(t *testing.T, dir, src string) []string // the command that runs the backend
	}{
		{"go", buildGo},
		{"typescript", buildTypeScript},
		{"python", buildPython},
	} {
		t.Run(lang.name, func(t *testing.T) {
			t.Parallel()
			src := docBlock(t, "webhook-verify-"+lang.name)
			secret := []byte("whsec_doc_" + lang.name + "_0123456789")
			url := startBackend(t, lang.build(t, t.TempDir(), src), secret)
			checkEngineExecutes(t, url, secret)
			checkSignatures(t, url, secret)
		})
	}
}

// need returns tool's path, or skips t when it is not on PATH (fails in CI).
func need(t *testing.T, tool, what string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not on PATH; CI must have it (%s)", tool, what)
		}
		t.Skipf("%s is not on PATH: %s", tool, what)
	}
	return p
}

// run runs a build step in dir and fails t with its output if it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// buildGo builds the Go backend as a module of its own (standard library
// only, so nothing is downloaded) with go vet's checks.
func buildGo(t *testing.T, dir, src string) []string {
	gobin := need(t, "go", "the Go webhook example of docs/api.md")
	write(t, filepath.Join(dir, "go.mod"), "module backend\n\ngo 1.22\n")
	write(t, filepath.Join(dir, "main.go"), src)
	env := []string{"GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local", "CGO_ENABLED=0"}
	run(t, dir, env, gobin, "vet", ".")
	run(t, dir, env, gobin, "build", "-o", "backend", ".")
	return []string{filepath.Join(dir, "backend")}
}

// buildTypeScript compiles the TypeScript backend with tsc --strict and
// the typescript and @types/node that clients/typescript pins, as
// docs/api.md says to. It does not install them: clients/typescript's own
// tests do (make clients-deps), and two npm ci in one folder at once, from
// two test processes, would break each other.
func buildTypeScript(t *testing.T, dir, src string) []string {
	const what = "the TypeScript webhook example of docs/api.md"
	node := need(t, "node", what)
	pkg, err := filepath.Abs("../clients/typescript")
	if err != nil {
		t.Fatal(err)
	}
	missing, err := nodetest.Unpinned(pkg)
	switch {
	case err != nil:
		t.Fatal(err)
	case len(missing) > 0 && os.Getenv("CI") != "":
		t.Fatalf("clients/typescript lacks %v: make clients-deps must run first (make test does)", missing)
	case len(missing) > 0:
		t.Skipf("clients/typescript lacks %v (run make clients-deps): %s", missing, what)
	}
	write(t, filepath.Join(dir, "backend.mts"), src)
	if err := os.Symlink(filepath.Join(pkg, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	run(t, dir, nodetest.QuietEnv, node, filepath.Join(pkg, "node_modules", "typescript", "bin", "tsc"),
		"--strict", "--noUnusedLocals", "--module", "nodenext", "--target", "es2022", "--types", "node", "backend.mts")
	return []string{node, filepath.Join(dir, "backend.mjs")}
}

// buildPython checks the Python backend compiles; it needs no package.
func buildPython(t *testing.T, dir, src string) []string {
	python := need(t, "python3", "the Python webhook example of docs/api.md")
	write(t, filepath.Join(dir, "backend.py"), src)
	run(t, dir, nil, python, "-m", "py_compile", "backend.py")
	return []string{python, filepath.Join(dir, "backend.py")}
}

// lockedBuffer collects a process's stderr while the test may read it.
type lockedBuffer = testlog.Buffer

// startBackend runs argv with the secret and PORT=0, and returns the base
// URL it prints ("listening on http://127.0.0.1:N"). The process is killed
// when t ends.
func startBackend(t *testing.T, argv []string, secret []byte) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Dir(argv[len(argv)-1])
	cmd.Env = append(os.Environ(), "COUNTERSIGN_WEBHOOK_SECRET="+string(secret), "PORT=0", "PYTHONDONTWRITEBYTECODE=1")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				select {
				case addr <- u:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-scanned // the pipe must be read to its end before Wait
		_ = cmd.Wait()
	})
	select {
	case u := <-addr:
		return strings.TrimSpace(u)
	case <-scanned:
		t.Fatalf("%s exited before it listened:\n%s", argv[len(argv)-1], stderr)
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not say where it listens within 2 minutes:\n%s", argv[len(argv)-1], stderr)
	}
	return ""
}

// checkEngineExecutes sends the backend a real execute: a webhook action's
// hook, called by the engine for a call the policy allows. The backend must
// accept it (the receipt names the operation id) and must refuse one signed
// with another secret, which the engine records as failed, not applied.
func checkEngineExecutes(t *testing.T, url string, secret []byte) {
	t.Helper()
	for _, tc := range []struct {
		name   string
		secret []byte
		want   countersign.ResultStatus
	}{
		{"the shared secret", secret, countersign.ResultSucceeded},
		{"another secret", []byte("not the backend's secret"), countersign.ResultFailed},
	} {
		a, err := webhook.NewAction(webhook.Spec{
			Name: "payments.refund", Kind: "write",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"},"customer":{"type":"string"}}}`),
			Execute:     &webhook.Endpoint{URL: url + "/execute", Timeout: 30 * time.Second},
		}, webhook.Options{Secret: tc.secret})
		if err != nil {
			t.Fatal(err)
		}
		e, err := countersign.New(countersign.Options{
			Store: memstore.New(nil), Actions: []*countersign.Action{a},
			Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "payments.refund", Effect: countersign.EffectAllow}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Call(context.Background(), &countersign.Call{
			Identity: alice, ThreadID: "t1", ToolCallID: "call_1", Action: "payments.refund",
			Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`),
		})
		if err != nil {
			t.Fatalf("%s: Call: %v", tc.name, err)
		}
		if res.Status != tc.want || res.Proposal == nil {
			t.Fatalf("%s: the call ended %s (error %q), want %s", tc.name, res.Status, res.Error, tc.want)
		}
		if want := "rcpt_" + res.Proposal.OperationID; tc.want == countersign.ResultSucceeded && res.Receipt != want {
			t.Errorf("%s: receipt %q, want %q", tc.name, res.Receipt, want)
		}
		if tc.want == countersign.ResultFailed && (res.Executed == nil || !strings.Contains(res.Error, "401")) {
			t.Errorf("%s: executed %v, error %q: want the backend's 401, a definite failure", tc.name, res.Executed, res.Error)
		}
	}
}

// checkSignatures posts signed, tampered, stale and malformed requests
// straight to the backend: it must accept exactly those Verify accepts.
func checkSignatures(t *testing.T, url string, secret []byte) {
	t.Helper()
	body := []byte(`{"operation_id":"op_doc_1","proposal_id":"prp_doc_1","action":"payments.refund","action_version":"1","input":{"amount":40,"customer":"c_9"},"state_version":"","tenant":"acme","actor":"alice","attempt":1}`)
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	h := webhook.Sign(secret, now, body)
	sig := strings.TrimPrefix(h, "t="+ts+",v1=")
	// signedAs is a v1 over another spelling of the timestamp.
	signedAs := func(ts string) string {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(ts + "."))
		m.Write(body)
		return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
	}
	cases := []struct {
		name   string
		header string
		body   []byte
		ok     bool
	}{
		{"signed now", h, body, true},
		{"signed two minutes ago", webhook.Sign(secret, now.Add(-2*time.Minute), body), body, true},
		{"signed two minutes ahead", webhook.Sign(secret, now.Add(2*time.Minute), body), body, true},
		{"a second v1 that does not match", "t=" + ts + ",v1=" + strings.Repeat("0", 64) + ",v1=" + sig, body, true},
		{"spaces around items", "t=" + ts + " , v1=" + sig, body, true},
		{"another scheme beside v1", "t=" + ts + ",v0=abc,v1=" + sig, body, true},
		{"upper-case hex", "t=" + ts + ",v1=" + strings.ToUpper(sig), body, true},
		{"body changed", h, bytes.Replace(body, []byte(`"amount":40`), []byte(`"amount":4000`), 1), false},
		{"a byte added to the body", h, append(append([]byte{}, body...), '\n'), false},
		{"another secret", webhook.Sign([]byte("another secret"), now, body), body, false},
		{"ten minutes old", webhook.Sign(secret, now.Add(-10*time.Minute), body), body, false},
		{"ten minutes ahead", webhook.Sign(secret, now.Add(10*time.Minute), body), body, false},
		{"timestamp changed", "t=" + strconv.FormatInt(now.Unix()+1, 10) + ",v1=" + sig, body, false},
		{"timestamp spelled with a sign", signedAs("+" + ts), body, false},
		{"timestamp spelled with a leading space inside", "t= " + ts + ",v1=" + sig, body, false},
		{"two timestamps", "t=" + ts + ",t=" + ts + ",v1=" + sig, body, false},
		{"no timestamp", "v1=" + sig, body, false},
		{"no v1", "t=" + ts, body, false},
		{"v1 with trailing characters", "t=" + ts + ",v1=" + sig + "zz", body, false},
		{"v1 cut short", "t=" + ts + ",v1=" + sig[:62], body, false},
		{"an item without =", "t=" + ts + ",v1=" + sig + ",junk", body, false},
		{"garbage", "garbage", body, false},
		{"no header", "", body, false},
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for _, tc := range cases {
		// The case's expectation is Verify's, the reference the examples follow.
		if err := webhook.Verify(secret, tc.header, tc.body, now, 0); (err == nil) != tc.ok {
			t.Fatalf("%s: Verify = %v, but the case expects ok=%v", tc.name, err, tc.ok)
		}
		req, err := http.NewRequest(http.MethodPost, url+"/execute", bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if tc.header != "" {
			req.Header.Set(webhook.SignatureHeader, tc.header)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case tc.ok && (resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(`"rcpt_op_doc_1"`))):
			t.Errorf("%s: %d %s, want 200 with the receipt rcpt_op_doc_1", tc.name, resp.StatusCode, answer)
		case !tc.ok && resp.StatusCode != http.StatusUnauthorized:
			t.Errorf("%s: %d %s, want 401", tc.name, resp.StatusCode, answer)
		}
	}
}
