package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// postOK sends an API request as token and fails the test unless it answers 200.
func postOK(t *testing.T, base, token, path, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b.String())
	}
	return b.String()
}

// TestAuditExportAndVerify runs `countersign audit export` and `countersign
// audit verify` against a real serve on SQLite (whose worker seals the
// chain), offline on exported files and against the server, before and
// after the file and the database are tampered with.
func TestAuditExportAndVerify(t *testing.T) {
	db := filepath.Join(t.TempDir(), "audit.db")
	s := startServer(t, "--store", "sqlite:"+db)
	srv := []string{"--server", s.base, "--token", "ck_dev_bob"}
	for i := range 2 {
		out := postOK(t, s.base, "ck_dev_alice", "/v1/calls", fmt.Sprintf(
			`{"thread_id":"t1","tool_call_id":"c%d","action":"payments.refund","input":{"amount":%d,"customer":"c_%d"},"wait_seconds":0}`, i, i+1, i))
		id := regexp.MustCompile(`"proposal_id":"(prp_[^"]+)"`).FindStringSubmatch(out)
		if id == nil {
			t.Fatalf("no proposal id in %s", out)
		}
		postOK(t, s.base, "ck_dev_bob", "/v1/proposals/"+id[1]+"/reject", `{"reason":"a <reason> & \"quotes\""}`)
	}
	// Two creations and two rejections: four events, sealed within about a
	// second by the server's sealer. An export ends with its exported_at
	// line; the demo signs no checkpoints.
	var export string
	var lines []string
	for {
		out, code := cli(t, append([]string{"audit", "export"}, srv...)...)
		if code != 0 {
			t.Fatalf("audit export: exit %d: %s", code, out)
		}
		export = out
		all := strings.Split(strings.TrimSuffix(export, "\n"), "\n")
		if !regexp.MustCompile(`^\{"exported_at":"[0-9T:.Z-]+"\}$`).MatchString(all[len(all)-1]) {
			t.Fatalf("export = %q, want it to end with an exported_at line", export)
		}
		if lines = all[:len(all)-1]; len(lines) >= 4 {
			break
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("the chain holds %q, want four events", export)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if len(lines) != 4 || !strings.HasPrefix(lines[0], `{"seq":1,`) {
		t.Fatalf("export = %q, want four JSON lines from seq 1", export)
	}
	write := func(name string, ls []string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	whole := write("whole.jsonl", lines)
	out, code := cli(t, "audit", "verify", whole)
	head := regexp.MustCompile(`head (4:[0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || head == nil {
		t.Fatalf("audit verify of the export: exit %d, %q; want 0 and the head", code, out)
	}
	edited := slicesWith(lines, 1, strings.Replace(lines[1], `"actor":"bob"`, `"actor":"mallory"`, 1))
	if edited[1] == lines[1] {
		t.Fatalf("the second event has no actor bob: %s", lines[1])
	}
	tail, _ := cli(t, append([]string{"audit", "export", "--after", "2"}, srv...)...)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"the server's chain", append([]string{"audit", "verify"}, srv...), 0, "holds: seq 1 to 4, head " + head[1]},
		{"the kept head", []string{"audit", "verify", whole, "--expect", head[1]}, 0, "holds"},
		{"another head", []string{"audit", "verify", whole, "--expect", "4:" + strings.Repeat("0", 64)}, exitBroken, "broken at seq 4: hash differs from the kept head's"},
		{"cut short", []string{"audit", "verify", write("short.jsonl", lines[:3]), "--expect", head[1]}, exitBroken, "broken at seq 4: missing"},
		{"edited", []string{"audit", "verify", write("edited.jsonl", edited)}, exitBroken, "broken at seq 2: hash does not match the event\n"},
		{"deleted", []string{"audit", "verify", write("deleted.jsonl", append(slicesClone(lines[:2]), lines[3]))}, exitBroken, "broken at seq 3: missing: seq 4 follows seq 2"},
		{"reordered", []string{"audit", "verify", write("reordered.jsonl", []string{lines[0], lines[2], lines[1], lines[3]})}, exitBroken, "broken at seq 2: missing: seq 3 follows seq 1"},
		{"a part", []string{"audit", "verify", write("tail.jsonl", strings.Split(strings.TrimSpace(tail), "\n")), "--after", "2", "--prev-hash", hashOf(t, lines[1])}, 0, "holds: seq 3 to 4"},
		{"a part without --after", []string{"audit", "verify", write("tail2.jsonl", strings.Split(strings.TrimSpace(tail), "\n"))}, exitBroken, "broken at seq 1: missing: the events start at seq 3"},
		{"not an operator", []string{"audit", "export", "--server", s.base, "--token", "ck_dev_alice"}, exitForbidden, "403"},
		{"no such file", []string{"audit", "verify", filepath.Join(t.TempDir(), "nope")}, exitUsage, "no such file"},
		{"bad --expect", []string{"audit", "verify", whole, "--expect", "4"}, exitUsage, "SEQ:HASH"},
	}
	for _, tc := range cases {
		out, code := cli(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, output %q; want exit %d and %q", tc.name, code, out, tc.code, tc.want)
		}
		if code == exitBroken && strings.Count(out, "\n") != 1 {
			t.Errorf("%s: output %q, want one line", tc.name, out)
		}
	}

	// An operator with the database rewrites an event's row: the server's
	// chain no longer holds, and verify names the event.
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `UPDATE events SET actor = 'mallory' WHERE id = (SELECT event_id FROM audit_chain WHERE tenant = 'acme' AND seq = 3)`); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, append([]string{"audit", "verify"}, srv...)...); code != exitBroken || out != "broken at seq 3: hash does not match the event\n" {
		t.Errorf("audit verify of the rewritten database: exit %d, %q; want 8, broken at seq 3", code, out)
	}
}

func slicesWith(s []string, i int, v string) []string {
	out := slicesClone(s)
	out[i] = v
	return out
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// hashOf is the hash field of an exported line.
func hashOf(t *testing.T, line string) string {
	t.Helper()
	m := regexp.MustCompile(`"hash":"([0-9a-f]{64})"`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no hash in %s", line)
	}
	return m[1]
}

// TestAuditVerifyMixedKinds: `countersign audit verify` holds a chain that
// mixes events with actor_kind (an agent's call, a person's rejection) and
// an event without it, written as a build from before kinds wrote events
// (no actor_kind column named, so the column's default): each line is
// hashed exactly as exported, the old one without the member, and taking
// the member out of a new line breaks the chain there.
func TestAuditVerifyMixedKinds(t *testing.T) {
	db := filepath.Join(t.TempDir(), "audit.db")
	s := startServer(t, "--store", "sqlite:"+db)
	srv := []string{"--server", s.base, "--token", "ck_dev_bob"}
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `INSERT INTO events (tenant, proposal_id, type, actor, via, status, detail, at)
		VALUES ('acme', 'prp_before_kinds', 'proposal.created', 'alice', '', 'pending', '', ?)`, time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	out := postOK(t, s.base, "ck_agent_alice", "/v1/calls",
		`{"thread_id":"t1","tool_call_id":"k1","action":"payments.refund","input":{"amount":5,"customer":"c_k1"},"wait_seconds":0}`)
	id := regexp.MustCompile(`"proposal_id":"(prp_[^"]+)"`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no proposal id in %s", out)
	}
	postOK(t, s.base, "ck_dev_bob", "/v1/proposals/"+id[1]+"/reject", `{"reason":"no"}`)
	var lines []string
	for {
		out, code := cli(t, append([]string{"audit", "export"}, srv...)...)
		if code != 0 {
			t.Fatalf("audit export: exit %d: %s", code, out)
		}
		all := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if lines = all[:len(all)-1]; len(lines) >= 3 {
			break
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("the chain holds %q, want three events", out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if len(lines) != 3 || strings.Contains(lines[0], "actor_kind") ||
		!strings.Contains(lines[1], `"actor":"alice","actor_kind":"agent"`) || !strings.Contains(lines[2], `"actor":"bob","actor_kind":"human"`) {
		t.Fatalf("export = %q, want the old event without actor_kind, then the agent's call and bob's rejection with theirs", lines)
	}
	write := func(name string, ls []string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if out, code := cli(t, "audit", "verify", write("mixed.jsonl", lines)); code != 0 || !strings.Contains(out, "holds: seq 1 to 3") {
		t.Errorf("audit verify of the mixed export: exit %d, %q; want 0, holds to seq 3", code, out)
	}
	if out, code := cli(t, append([]string{"audit", "verify"}, srv...)...); code != 0 || !strings.Contains(out, "holds: seq 1 to 3") {
		t.Errorf("audit verify against the server: exit %d, %q; want 0, holds to seq 3", code, out)
	}
	stripped := slicesWith(lines, 1, strings.Replace(lines[1], `,"actor_kind":"agent"`, "", 1))
	if out, code := cli(t, "audit", "verify", write("stripped.jsonl", stripped)); code != exitBroken || out != "broken at seq 2: hash does not match the event\n" {
		t.Errorf("audit verify with the kind taken out: exit %d, %q; want broken at seq 2", code, out)
	}
}
