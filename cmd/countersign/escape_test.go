package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// hostile is text a hostile agent or server puts wherever the client prints
// the server's words: a screen clear and a title change, a carriage return
// and newline that forge a row, a tab that shifts columns, DEL, C1 controls
// (NEL, CSI), bidi overrides and isolates, zero-width characters, the BOM,
// the line separator, a soft hyphen, a tag character, a private-use and an
// unassigned one.
const hostile = "x\x1b[2J\x1b]0;owned\x07\r\nFORGED\tFORGED\x7f\u0085\u009b\u202e\u2066\u200b\u200f\ufeff\u2028\u00ad\U000e0001\ue000\u0378"

// unsafeInOutput are the characters that must never reach the terminal.
var unsafeInOutput = []string{"\x1b", "\x07", "\r", "\x7f", "\u0085", "\u009b", "\u202e", "\u2066",
	"\u200b", "\u200f", "\ufeff", "\u2028", "\u00ad", "\U000e0001", "\ue000", "\u0378", "\nFORGED", "\tFORGED", "\xff"}

func hostileProposal() map[string]any {
	return map[string]any{
		"id": "prp_" + hostile, "tenant": "acme", "requester": hostile, "thread_id": hostile, "run_id": hostile,
		"tool_call_id": hostile, "action": "payments." + hostile, "action_version": hostile,
		"input": map[string]any{hostile: hostile}, "input_digest": "sha256:00", "preview": hostile,
		"state_version": hostile, "confirmation": map[string]any{"title": hostile, "verb": hostile},
		"mode": "wait", "status": "pending" + hostile, "approvers": []string{hostile}, "quorum": 1,
		"decisions": []map[string]any{{"actor": hostile, "decision": "approved", "via": hostile,
			"at": "2026-03-01T12:00:00Z", "reason": hostile}},
		"expires_at": "2026-03-01T12:00:00Z", "operation_id": hostile,
		"outcome": map[string]any{"proposal_id": hostile, "status": "succeeded", "executed": true,
			"error": nil, "summary": hostile, "at": "2026-03-01T12:00:00Z"},
		"created_at": "2026-03-01T12:00:00Z", "updated_at": "2026-03-01T12:00:00Z",
	}
}

// hostileServer answers every client route with hostile text: proposals,
// decision answers, and error bodies (JSON, and raw text that is not even
// UTF-8).
func hostileServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	apiErr := func(code string) map[string]any {
		return map[string]any{"error": map[string]any{"code": code + hostile, "message": "no: " + hostile}}
	}
	mux.HandleFunc("GET /v1/proposals", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]any{"proposals": []any{hostileProposal(), hostileProposal()}})
	})
	mux.HandleFunc("GET /v1/threads/{id}/proposals", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]any{"proposals": []any{hostileProposal()}})
	})
	mux.HandleFunc("GET /v1/proposals/good", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, hostileProposal())
	})
	mux.HandleFunc("GET /v1/proposals/forbidden", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 403, apiErr("FORBIDDEN"))
	})
	mux.HandleFunc("GET /v1/proposals/missing", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 404, apiErr("NOT_FOUND"))
	})
	mux.HandleFunc("GET /v1/proposals/broken", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(502)
		_, _ = w.Write([]byte("gateway says " + hostile + "\xff\xfe"))
	})
	mux.HandleFunc("GET /v1/proposals/garbled", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("{\"id\": \x1b]0;owned\x07}"))
	})
	mux.HandleFunc("POST /v1/proposals/good/{verb}", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]any{"status": "applied", "proposal": hostileProposal()})
	})
	mux.HandleFunc("POST /v1/proposals/odd/{verb}", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]any{"status": "weird" + hostile, "proposal": hostileProposal()})
	})
	mux.HandleFunc("POST /v1/proposals/taken/{verb}", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 409, apiErr("INVALID_STATE"))
	})
	mux.HandleFunc("POST /v1/proposals/failing/{verb}", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 500, apiErr("INTERNAL"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestClientEscapesServerText runs every client command against a server
// whose answers are full of control and format characters, with and without
// --json, and checks that none reaches the output or the error message
// unescaped, and that the JSON printed still decodes to the server's text.
func TestClientEscapesServerText(t *testing.T) {
	t.Parallel()
	srv := hostileServer(t)
	cases := []struct {
		name    string
		args    []string
		wantErr bool
		json    bool
	}{
		{"list", []string{"proposals", "list"}, false, false},
		{"list json", []string{"proposals", "list", "--json"}, false, true},
		{"list thread", []string{"proposals", "list", "--thread", hostile}, false, false},
		{"list thread json", []string{"proposals", "list", "--thread", hostile, "--json"}, false, true},
		{"show", []string{"proposals", "show", "good"}, false, false},
		{"show json", []string{"proposals", "show", "good", "--json"}, false, true},
		{"show forbidden", []string{"proposals", "show", "forbidden"}, true, false},
		{"show forbidden json", []string{"proposals", "show", "forbidden", "--json"}, true, false},
		{"show missing", []string{"proposals", "show", "missing"}, true, false},
		{"show raw error", []string{"proposals", "show", "broken"}, true, false},
		{"show undecodable", []string{"proposals", "show", "garbled"}, true, false},
		{"approve", []string{"approve", "good"}, false, false},
		{"approve json", []string{"approve", "good", "--json"}, false, true},
		{"reject odd answer", []string{"reject", "odd"}, true, false},
		{"reject odd answer json", []string{"reject", "odd", "--json"}, true, true},
		{"approve conflict", []string{"approve", "taken"}, true, false},
		{"resolve", []string{"resolve", "good", "--outcome", "failed", "--note", "n"}, false, false},
		{"resolve failing", []string{"resolve", "failing", "--outcome", "failed", "--note", "n"}, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := runEscaped(t, srv.URL, c.args, c.wantErr)
			if c.json && err == nil || c.json && c.name == "reject odd answer json" {
				var v any
				if jerr := json.Unmarshal(out, &v); jerr != nil {
					t.Fatalf("--json printed no JSON: %v\n%s", jerr, out)
				}
				if !containsString(v, "pending"+hostile) && !containsString(v, "weird"+hostile) {
					t.Errorf("the JSON printed lost the server's text: %s", out)
				}
			}
		})
	}
}

// runEscaped runs the CLI with args against the hostile server at srvURL,
// checks that it fails exactly when wantErr, that it printed some of the
// server's text and none of unsafeInOutput, and returns what it printed.
func runEscaped(t *testing.T, srvURL string, args []string, wantErr bool) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	root := rootCmd()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(args, "--server", srvURL, "--token", "tok"))
	err := root.ExecuteContext(context.Background())
	if (err != nil) != wantErr {
		t.Fatalf("error %v, want error %v; output:\n%s", err, wantErr, out.String())
	}
	printed := out.String()
	if err != nil {
		printed += "countersign: " + err.Error() + "\n" // as main prints it
	}
	if !strings.Contains(printed, "x") {
		t.Fatalf("nothing of the server's text printed:\n%s", printed)
	}
	for _, bad := range unsafeInOutput {
		if strings.Contains(printed, bad) {
			t.Errorf("output carries %q unescaped:\n%s", bad, printed)
		}
	}
	return out.Bytes(), err
}

// containsString reports whether the decoded JSON value v holds s.
func containsString(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return x == s
	case []any:
		for _, e := range x {
			if containsString(e, s) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if containsString(e, s) {
				return true
			}
		}
	}
	return false
}

// TestEscapeText pins the escapes the client prints: the contract's
// \u{XXXX} of plaintext.Line, one per character, and ordinary text
// (non-ASCII letters, emoji, backslashes) left alone.
func TestEscapeText(t *testing.T) {
	t.Parallel()
	srv := hostileServer(t)
	out, _ := runEscaped(t, srv.URL, []string{"proposals", "show", "good"}, false)
	for _, want := range []string{`x\u{001B}[2J`, `\u{000D}\u{000A}FORGED\u{0009}FORGED`, `\u{007F}\u{0085}\u{009B}`,
		`\u{202E}\u{2066}\u{200B}\u{200F}\u{FEFF}\u{2028}\u{00AD}\u{E0001}\u{E000}\u{0378}`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("proposals show prints no %s:\n%s", want, out)
		}
	}
}

// FuzzEscape: whatever the server sends, the JSON printed holds no
// character a terminal obeys and still decodes to what was sent (the text
// printed is plaintext.Line, fuzzed in its package).
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", hostile, "\xff\xfe", "a\\u202eb", "\U0001f642\u200d\U0001f642"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		doc, err := json.MarshalIndent(map[string]any{"v": s, "l": []string{s}}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		esc := escapeJSON(doc)
		if strings.ContainsFunc(string(esc), jsonUnsafe) {
			t.Fatalf("escapeJSON left an unsafe character: %q", esc)
		}
		var back, orig any
		if err := json.Unmarshal(esc, &back); err != nil {
			t.Fatalf("escapeJSON broke the document: %v: %q", err, esc)
		}
		_ = json.Unmarshal(doc, &orig)
		if !reflect.DeepEqual(back, orig) {
			t.Fatalf("escapeJSON changed the value: %q -> %q", doc, esc)
		}
	})
}
