package event

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
)

// validatorPackages are the npm packages agui-validate.mjs needs; their
// versions are the ones test/clients/package.json pins.
var validatorPackages = []string{"@ag-ui/core", "zod"}

// needValidator returns test/clients' absolute path once node and the
// pinned @ag-ui/core and zod are installed there. Without them the test
// skips, except in CI (CI set), where it fails. It never installs anything:
// `make clients-deps` does, and test/clients' own tests run npm ci when
// node_modules is stale, which a second installer must not race.
func needValidator(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not on PATH: the official-schema check needs Node.js 20")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "test", "clients"))
	if err != nil {
		t.Fatal(err)
	}
	stale, err := nodetest.Unpinned(dir)
	if err != nil {
		t.Fatalf("test/clients: %v", err)
	}
	for _, pkg := range stale {
		for _, name := range validatorPackages {
			if strings.HasPrefix(pkg, name+"@") {
				missing("test/clients/node_modules lacks %s: run make clients-deps", pkg)
			}
		}
	}
	return dir
}

// validate runs agui-validate.mjs on lines, one event's JSON each, and
// returns its standard output and error and whether it exited 0.
func validate(t *testing.T, dir string, lines [][]byte) (stdout, stderr string, ok bool) {
	t.Helper()
	// Only against a hang: nothing is asserted about time.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "agui-validate.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1")
	cmd.Stdin = bytes.NewReader(append(bytes.Join(lines, []byte("\n")), '\n'))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		if _, exited := errors.AsType[*exec.ExitError](err); !exited || ctx.Err() != nil {
			t.Fatalf("node agui-validate.mjs: %v\n%s", err, errOut.Bytes())
		}
	}
	return out.String(), errOut.String(), err == nil
}

// Every event the golden tests pin is valid under @ag-ui/core's own
// validators, with no property they do not declare.
func TestOfficialSchema(t *testing.T) {
	t.Parallel()
	dir := needValidator(t)
	lines := make([][]byte, len(goldenCases))
	for i, c := range goldenCases {
		b, err := json.Marshal(c.event)
		if err != nil {
			t.Fatal(err)
		}
		lines[i] = b
	}
	stdout, stderr, ok := validate(t, dir, lines)
	if !ok {
		t.Fatalf("@ag-ui/core rejects a golden event: %s", stderr)
	}
	var report struct {
		OK              int    `json:"ok"`
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("validator output %q: %v", stdout, err)
	}
	if report.OK != len(lines) {
		t.Errorf("validator checked %d events, want %d", report.OK, len(lines))
	}
	if report.ProtocolVersion != ProtocolVersion {
		t.Errorf("@ag-ui/core speaks protocol %q, this package %q", report.ProtocolVersion, ProtocolVersion)
	}
}

// The validator rejects what the schema rejects, so a pass above means
// something: each of these fails, naming the reason.
func TestOfficialSchemaRejects(t *testing.T) {
	t.Parallel()
	dir := needValidator(t)
	cases := []struct {
		name, event, reason string
	}{
		{"unknown field", `{"type":"TEXT_MESSAGE_START","messageId":"m","colour":"red"}`, "colour is not a property"},
		{"unknown nested field", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"p","reason":"tool_call","proposal":{}}]}}`, "outcome.interrupts[0].proposal is not a property"},
		{"no interrupts", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[]}}`, "outcome.interrupts"},
		{"success with interrupts", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success","interrupts":[{"id":"p","reason":"x"}]}}`, "outcome.interrupts is not a property"},
		{"unknown outcome", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"paused"}}`, "outcome"},
		{"null result", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","result":null}`, "result"},
		{"missing field", `{"type":"TOOL_CALL_START","toolCallId":"c"}`, "toolCallName"},
		{"fractional timestamp", `{"type":"RUN_ERROR","message":"m","timestamp":1.5}`, "timestamp"},
		{"tool role text", `{"type":"TEXT_MESSAGE_START","messageId":"m","role":"tool"}`, "role"},
		{"unknown type", `{"type":"RUN_PAUSED"}`, "type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, ok := validate(t, dir, [][]byte{[]byte(c.event)})
			if ok {
				t.Fatalf("accepted %s", c.event)
			}
			if !strings.Contains(stderr, c.reason) {
				t.Errorf("reason %q, want it to mention %q", stderr, c.reason)
			}
		})
	}
}
