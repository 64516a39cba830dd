package main

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPProposalShown: a held MCP call's proposal says which server's
// tool it calls, with the call's arguments, in the API, in the CLI's
// `proposals show` and on the inbox's proposal page.
func TestMCPProposalShown(t *testing.T) {
	t.Parallel()
	a, ctx := composeRunning(t, mcpConfig(t, ""))
	ts := httptest.NewServer(a.handler)
	t.Cleanup(ts.Close)
	if err := a.gateway.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: ts.URL + "/tools/mcp", HTTPClient: &http.Client{Transport: bearerTransport("k_alice")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "good__note", Arguments: map[string]any{"text": "call <b>me</b>"}})
	if err != nil || !res.IsError {
		t.Fatalf("good__note: %v %+v, want held", err, res)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	var held struct {
		ProposalID string `json:"proposal_id"`
	}
	if json.Unmarshal(sc, &held) != nil || held.ProposalID == "" {
		t.Fatalf("structuredContent %s names no proposal", sc)
	}
	const title = "Call note on the MCP server good"

	// The API.
	r, _ := http.NewRequest("GET", ts.URL+"/v1/proposals/"+held.ProposalID, nil)
	r.Header.Set("Authorization", "Bearer k_alice")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Action, Preview string
		Confirmation    struct{ Title string }
		Input           map[string]any
	}
	_ = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if p.Action != "good__note" || p.Preview != title || p.Confirmation.Title != title || p.Input["text"] != "call <b>me</b>" {
		t.Fatalf("GET /v1/proposals/%s: %+v", held.ProposalID, p)
	}

	// The CLI.
	out, code := cli(t, "proposals", "show", held.ProposalID, "--server", ts.URL, "--token", "k_alice")
	if code != 0 || !strings.Contains(out, title) || !strings.Contains(out, "good__note") || !strings.Contains(out, `"text":"call <b>me</b>"`) {
		t.Fatalf("proposals show (exit %d):\n%s", code, out)
	}

	// The inbox, signed in with alice's key.
	page := inboxPage(t, ts.URL, "k_alice", "/proposals/"+held.ProposalID)
	for _, want := range []string{"<h1>" + title + "</h1>", "<code>good__note</code>", html.EscapeString(`"text": "call <b>me</b>"`)} {
		if !strings.Contains(page, want) {
			t.Fatalf("the inbox's proposal page lacks %q:\n%s", want, page)
		}
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// inboxPage signs in to the inbox at base with key and returns the page at
// path.
func inboxPage(t *testing.T, base, key, path string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	get := func(p string) string {
		t.Helper()
		resp, err := c.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d\n%s", p, resp.StatusCode, b)
		}
		return string(b)
	}
	m := csrfField.FindStringSubmatch(get("/login"))
	if m == nil {
		t.Fatal("the sign-in form has no csrf field")
	}
	form := url.Values{"csrf": {m[1]}, "token": {key}, "next": {"/"}}
	r, _ := http.NewRequest("POST", base+"/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", base)
	resp, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	return get(path)
}
