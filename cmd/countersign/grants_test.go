package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/server"
)

// TestCLIGrants runs `countersign grants list|revoke` against a real serve
// (the demo, on SQLite): bob approves alice's refund with --remember
// thread; once the refund succeeds the grant is listed live for bob and
// alice, with its action, scope, thread and origin proposal, and for
// neither carol (who did not grant it) nor eve (another tenant); carol may
// not revoke it (exit 5), unknown and odd ids are not found (exit 6), and
// bob's revocation shows as revoked in the list and in its JSON.
func TestCLIGrants(t *testing.T) {
	s := startServer(t, "--store", "sqlite:"+filepath.Join(t.TempDir(), "grants.db"))
	ans := post(t, s.base, "ck_dev_alice", "/v1/calls",
		`{"thread_id":"t_g","tool_call_id":"c1","action":"payments.refund","input":{"amount":5,"customer":"c_1"}}`)
	pid, _ := ans["proposal_id"].(string)
	if pid == "" {
		t.Fatalf("no proposal id in %v", ans)
	}
	srv := []string{"--server", s.base}
	as := func(key string, args ...string) []string { return append(append(args, "--token", key), srv...) }
	if out, code := cli(t, as("ck_dev_bob", "approve", pid, "--remember", "thread")...); code != 0 || !strings.Contains(out, "applied") {
		t.Fatalf("approve with remember: exit %d\n%s", code, out)
	}
	// The grant goes live when the refund succeeds: wait for it.
	if p := get(t, s.base, "ck_dev_bob", "/v1/proposals/"+pid+"?wait_seconds=30"); p["status"] != "succeeded" {
		t.Fatalf("the refund: %v", p["status"])
	}

	out, code := cli(t, as("ck_dev_bob", "grants", "list", "--json")...)
	var page struct {
		Grants []struct {
			ID               string  `json:"id"`
			OriginProposalID string  `json:"origin_proposal_id"`
			InputDigest      string  `json:"input_digest"`
			RevokedAt        *string `json:"revoked_at"`
			RevokedBy        string  `json:"revoked_by"`
		} `json:"grants"`
	}
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || len(page.Grants) != 1 {
		t.Fatalf("grants list --json: exit %d, %v\n%s", code, err, out)
	}
	g := page.Grants[0]
	if g.OriginProposalID != pid || !strings.HasPrefix(g.InputDigest, "sha256:") || g.RevokedAt != nil {
		t.Fatalf("the grant: %+v", g)
	}
	row := regexp.MustCompile(regexp.QuoteMeta(g.ID) + `\s+live\s+thread\s+payments\.refund v1\s+alice\s+t_g\s+sha256:\S+\s+` +
		regexp.QuoteMeta(pid) + `\s+bob\s`)
	for _, key := range []string{"ck_dev_bob", "ck_dev_alice"} {
		out, code := cli(t, as(key, "grants", "list")...)
		if code != 0 || !strings.Contains(out, "STATE") || !row.MatchString(out) {
			t.Errorf("%s: grants list: exit %d\n%s", key, code, out)
		}
	}
	if out, code := cli(t, as("ck_dev_bob", "grants", "list", "--thread", "t_other")...); code != 0 || strings.Contains(out, g.ID) || !strings.Contains(out, "(none)") {
		t.Errorf("another thread's grants: exit %d\n%s", code, out)
	}

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"carol lists", as("ck_dev_carol", "grants", "list"), 0, "(none)"},
		{"eve lists", as("ck_dev_eve", "grants", "list"), 0, "(none)"},
		{"carol revokes", as("ck_dev_carol", "grants", "revoke", g.ID), exitForbidden, "forbidden (403)"},
		{"eve revokes", as("ck_dev_eve", "grants", "revoke", g.ID), exitNotFound, "not found (404)"},
		{"unknown id", as("ck_dev_bob", "grants", "revoke", "grt_nope"), exitNotFound, "not found (404): no such grant"},
		{"a long id", as("ck_dev_bob", "grants", "revoke", strings.Repeat("g", 400)), exitNotFound, "not found (404)"},
		{"an id with a slash", as("ck_dev_bob", "grants", "revoke", "../proposals/"+pid), exitNotFound, "not found (404)"},
		{"a dot segment", as("ck_dev_bob", "grants", "revoke", ".."), exitNotFound, "no grant"},
		{"no id", as("ck_dev_bob", "grants", "revoke"), exitUsage, "Usage"},
		{"bad token", as("nope", "grants", "list"), exitUnauth, "401"},
		{"unreachable", []string{"grants", "list", "--token", "x", "--server", "http://127.0.0.1:1"}, exitUnreachable, "cannot reach"},
		{"bob revokes", as("ck_dev_bob", "grants", "revoke", g.ID), 0, "revoked grant " + g.ID + " (revoked by bob"},
		{"revoked in the list", as("ck_dev_alice", "grants", "list"), 0, g.ID + "  revoked"},
		{"revoke again", as("ck_dev_bob", "grants", "revoke", g.ID, "--json"), 0, `"revoked_by": "bob"`},
	}
	for _, tc := range cases {
		out, code := cli(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, output %q; want exit %d and %q", tc.name, code, out, tc.code, tc.want)
		}
	}
	// The revocation holds: the same input in the thread asks again.
	again := post(t, s.base, "ck_dev_alice", "/v1/calls",
		`{"thread_id":"t_g","tool_call_id":"c2","action":"payments.refund","input":{"amount":5,"customer":"c_1"}}`)
	if again["status"] != "pending" {
		t.Errorf("the same call after revoking: %v, want pending", again["status"])
	}
	// The proposal refused by the slash id is untouched.
	if p := get(t, s.base, "ck_dev_bob", "/v1/proposals/"+pid); p["status"] != "succeeded" {
		t.Errorf("the origin proposal: %v", p["status"])
	}
}

// hostileGrant is a grant whose every text field is hostile.
func hostileGrant() map[string]any {
	return map[string]any{
		"id": "grt_" + hostile, "tenant": "acme", "requester": hostile, "scope": "thread" + hostile,
		"thread_id": hostile, "run_id": hostile, "action": "payments." + hostile, "action_version": hostile,
		"input_digest": "sha256:" + hostile, "origin_proposal_id": "prp_" + hostile, "granted_by": hostile,
		"created_at": "2026-03-01T12:00:00Z", "activated_at": "2026-03-01T12:00:01Z", "expires_at": nil,
		"revoked_at": "2026-03-01T12:00:02Z", "revoked_by": hostile,
	}
}

// TestGrantsEscapeServerText: whatever a server puts in a grant or an
// error, `grants list` and `grants revoke` print no character a terminal
// obeys, and --json still decodes to the server's text.
func TestGrantsEscapeServerText(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /v1/grants", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]any{"grants": []any{hostileGrant(), hostileGrant()}})
	})
	mux.HandleFunc("DELETE /v1/grants/good", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]any{"grant": hostileGrant()})
	})
	mux.HandleFunc("DELETE /v1/grants/missing", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 404, map[string]any{"error": map[string]any{"code": "NOT_FOUND" + hostile, "message": "no: " + hostile}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cases := []struct {
		name    string
		args    []string
		wantErr bool
		json    bool
	}{
		{"list", []string{"grants", "list"}, false, false},
		{"list json", []string{"grants", "list", "--json"}, false, true},
		{"list thread", []string{"grants", "list", "--thread", hostile}, false, false},
		{"revoke", []string{"grants", "revoke", "good"}, false, false},
		{"revoke json", []string{"grants", "revoke", "good", "--json"}, false, true},
		{"revoke missing", []string{"grants", "revoke", "missing"}, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _ := runEscaped(t, srv.URL, c.args, c.wantErr)
			if c.json {
				var v any
				if jerr := json.Unmarshal(out, &v); jerr != nil {
					t.Fatalf("--json printed no JSON: %v\n%s", jerr, out)
				}
				if !containsString(v, "grt_"+hostile) {
					t.Errorf("the JSON printed lost the server's text: %s", out)
				}
			}
		})
	}
}

// TestPrintGrantsStates: the table's STATE column for each standing a
// grant's fields give it, expiry included (the demo's policy sets none),
// and "(any)" for a grant widened to any input.
func TestPrintGrantsStates(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	gs := []*server.Grant{
		{ID: "grt_live", ActivatedAt: at(-time.Hour), InputDigest: "sha256:00"},
		{ID: "grt_until", ActivatedAt: at(-time.Hour), ExpiresAt: at(time.Hour), InputDigest: "sha256:00"},
		{ID: "grt_inactive", InputDigest: "sha256:00"},
		{ID: "grt_expired", ActivatedAt: at(-time.Hour), ExpiresAt: at(0), InputDigest: "sha256:00"},
		{ID: "grt_revoked", ActivatedAt: at(-time.Hour), ExpiresAt: at(-time.Minute), RevokedAt: at(-2 * time.Minute), InputDigest: "sha256:00"},
		{ID: "grt_any", ActivatedAt: at(-time.Hour)},
	}
	var out bytes.Buffer
	if err := printGrants(&out, gs, now); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"grt_live": "live", "grt_until": "live", "grt_inactive": "inactive",
		"grt_expired": "expired", "grt_revoked": "revoked", "grt_any": "live"} {
		if !regexp.MustCompile(`(?m)^` + id + `\s+` + want + `\s`).MatchString(out.String()) {
			t.Errorf("%s: want state %s:\n%s", id, want, out.String())
		}
	}
	if !regexp.MustCompile(`(?m)^grt_any\s.*\(any\)`).MatchString(out.String()) {
		t.Errorf("a grant for any input:\n%s", out.String())
	}
}
