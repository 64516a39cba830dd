package clients

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// sseLine is one line that sse.mjs prints.
type sseLine struct {
	Kind       string `json:"kind"` // open, event, error
	Connection int    `json:"connection"`
	ID         string `json:"id"`
	Type       string `json:"type"`
	Proposal   string `json:"proposal"`
	Status     string `json:"status"`
	Code       *int   `json:"code"`
	Message    string `json:"message"`
	Closed     bool   `json:"closed"`
}

// sseClient is a running sse.mjs: the npm eventsource client.
type sseClient struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan sseLine
	done  chan error
}

// hangGuard bounds each wait for the client, only so that a broken stream
// fails the test instead of hanging it; nothing is asserted about time.
const hangGuard = 2 * time.Minute

// startSSE runs sse.mjs against url as token's holder; lastEventID, when
// not empty, is sent on its first connection only.
func startSSE(t *testing.T, dir, url, token, lastEventID string) *sseClient {
	t.Helper()
	args := []string{filepath.Join(dir, "sse.mjs"), url, token}
	if lastEventID != "" {
		args = append(args, lastEventID)
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), quietEnv...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &sseClient{t: t, cmd: cmd, stdin: stdin, lines: make(chan sseLine, 1024), done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l sseLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = sseLine{Kind: "garbage", Message: sc.Text()}
			}
			c.lines <- l
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	t.Cleanup(c.close)
	return c
}

// next returns the client's next line; a client that exits first fails the
// test.
func (c *sseClient) next() sseLine {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("the eventsource client exited: %v", <-c.done)
		}
		if l.Kind == "garbage" {
			c.t.Fatalf("the eventsource client printed %q", l.Message)
		}
		return l
	case <-time.After(hangGuard):
		c.t.Fatal("the eventsource client said nothing more")
	}
	panic("unreachable")
}

// until reads lines up to and including the first of kind, and returns the
// events among them.
func (c *sseClient) until(kind string) (events []sseLine, last sseLine) {
	c.t.Helper()
	for {
		l := c.next()
		if l.Kind == "event" {
			events = append(events, l)
		}
		if l.Kind == kind {
			return events, l
		}
	}
}

// close ends the client (its stdin) and waits for it.
func (c *sseClient) close() {
	if c.stdin == nil {
		return
	}
	_ = c.stdin.Close()
	c.stdin = nil
	for range c.lines {
	}
	<-c.done
}

// streamed maps an audit event type to the stream's event name ("": the
// stream leaves it out), as GET /v1/events names them.
func streamed(auditType string) string {
	switch auditType {
	case "proposal.created", "proposal.decided", "proposal.settled", "proposal.expired", "proposal.superseded":
		return auditType
	case "proposal.cancelled", "proposal.resolved":
		return "proposal.settled"
	}
	return ""
}

// TestEventSourceAcrossRestart follows GET /v1/events with the npm
// eventsource client while the server restarts on the same SQLite file,
// and while events happen with no server on the client's address (another
// server on the same file makes them). The client reconnects by itself
// with Last-Event-ID, and what it heard is every event of the proposals,
// in order, once each: no duplicate, no gap.
func TestEventSourceAcrossRestart(t *testing.T) {
	dir := needNode(t)
	db := filepath.Join(t.TempDir(), "countersign.db")
	first := startServer(t, db, "127.0.0.1:0")
	client := startSSE(t, dir, first.URL+"/v1/events", "ck_dev_bob", "")
	if _, l := client.until("open"); l.Connection != 1 {
		t.Fatalf("first open on connection %d", l.Connection)
	}

	var proposals []string
	call := func(p *serverProcess, n int) string {
		t.Helper()
		res := p.must(200, "POST", "/v1/calls", "ck_dev_alice", map[string]any{
			"thread_id": "sse", "tool_call_id": "call_" + strconv.Itoa(n), "action": "payments.refund",
			"input": map[string]any{"amount": 10 + n, "customer": "c_" + strconv.Itoa(n)},
		})
		id, _ := res["proposal_id"].(string)
		if res["status"] != "pending" || id == "" {
			t.Fatalf("call %d: %v, want pending", n, res)
		}
		proposals = append(proposals, id)
		return id
	}
	// settle decides id and waits for it to be terminal, so that its audit
	// trail is complete when the expected events are read.
	settle := func(p *serverProcess, id, verdict string) {
		t.Helper()
		d := p.must(200, "POST", "/v1/proposals/"+id+"/"+verdict, "ck_dev_bob", map[string]any{"reason": "test"})
		if d["status"] != "applied" {
			t.Fatalf("%s %s: %v", verdict, id, d)
		}
		for {
			got := p.must(200, "GET", "/v1/proposals/"+id+"?wait_seconds=30", "ck_dev_bob", nil)
			if s := got["status"]; s == "succeeded" || s == "failed" || s == "rejected" {
				return
			} else if s != "approved" && s != "executing" {
				t.Fatalf("%s after %s: %v", id, verdict, got)
			}
		}
	}
	// hear reads the client's events until it has n in all, or one with
	// an id of at least through (ids grow: nothing before it is still to
	// come).
	var heard []sseLine
	hear := func(n, through int) {
		t.Helper()
		for len(heard) < n && (len(heard) == 0 || atoi(t, heard[len(heard)-1].ID) < through) {
			l := client.next()
			switch l.Kind {
			case "event":
				heard = append(heard, l)
			case "error":
				if l.Closed {
					t.Fatalf("the client gave up: %+v", l)
				}
			}
		}
	}

	// Live, on the first server: two calls, one approved and run.
	p1 := call(first, 1)
	call(first, 2)
	settle(first, p1, "approve")
	hear(4, math.MaxInt) // created ×2, decided, settled

	// The server stops; the client loses its stream and keeps retrying.
	first.Stop()
	evs, l := client.until("error")
	heard = append(heard, evs...)
	if l.Closed {
		t.Fatalf("the client closed instead of retrying: %+v", l)
	}
	// Meanwhile another server on the same file serves other clients: a
	// new call, and the second proposal approved and run.
	other := startServer(t, db, "127.0.0.1:0")
	p3 := call(other, 3)
	settle(other, proposals[1], "approve")
	other.Stop()

	// The server comes back where the client looks for it.
	back := startServer(t, db, first.Addr)
	evs, l = client.until("open")
	heard = append(heard, evs...)
	if l.Connection < 2 {
		t.Fatalf("reopened on connection %d", l.Connection)
	}
	// Live again, once the client is back: one more call, and the third
	// proposal rejected.
	call(back, 4)
	settle(back, p3, "reject")

	var want []sseLine
	for _, id := range proposals {
		trail := back.must(200, "GET", "/v1/proposals/"+id+"/events", "ck_dev_bob", nil)
		evs, _ := trail["events"].([]any)
		for _, e := range evs {
			ev, _ := e.(map[string]any)
			typ, _ := ev["type"].(string)
			if name := streamed(typ); name != "" {
				n, _ := ev["id"].(float64)
				want = append(want, sseLine{ID: strconv.FormatInt(int64(n), 10), Type: name, Proposal: id})
			}
		}
	}
	slices.SortFunc(want, func(a, b sseLine) int { return atoi(t, a.ID) - atoi(t, b.ID) })
	hear(len(want), atoi(t, want[len(want)-1].ID))
	client.close()
	for l := range client.lines {
		if l.Kind == "event" {
			heard = append(heard, l)
		}
	}

	if len(want) != 4+2+3 { // created ×4, decided ×3, settled ×2
		t.Errorf("the audit trails hold %d streamed events, want 9: %+v", len(want), want)
	}
	got := make([]string, len(heard))
	for i, l := range heard {
		got[i] = fmt.Sprintf("%s %s %s", l.ID, l.Type, l.Proposal)
	}
	exp := make([]string, len(want))
	for i, l := range want {
		exp[i] = fmt.Sprintf("%s %s %s", l.ID, l.Type, l.Proposal)
	}
	if !slices.Equal(got, exp) {
		t.Errorf("the client heard (id type proposal):\n%v\nwant every event once, in order:\n%v", got, exp)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("event id %q: %v", s, err)
	}
	return n
}

// TestEventSourceInvalidCursor checks that a Last-Event-ID the server never
// issued, ahead of the newest event or malformed, answers 400
// INVALID_CURSOR rather than a stream that stays silent, and that the npm
// eventsource client, told so, stops (and does not wait forever).
func TestEventSourceInvalidCursor(t *testing.T) {
	dir := needNode(t)
	srv := startServer(t, filepath.Join(t.TempDir(), "countersign.db"), "127.0.0.1:0")
	srv.must(200, "POST", "/v1/calls", "ck_dev_alice", map[string]any{
		"thread_id": "t1", "tool_call_id": "call_1", "action": "payments.refund", "input": map[string]any{"amount": 5, "customer": "c_1"},
	})
	for _, id := range []string{"999999999", "12abc", "-1", "1e3"} {
		t.Run(id, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/events", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer ck_dev_bob")
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Last-Event-ID", id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if resp.StatusCode != 400 || json.NewDecoder(resp.Body).Decode(&body) != nil || body.Error.Code != "INVALID_CURSOR" {
				t.Fatalf("Last-Event-ID %q: %d %+v, want 400 INVALID_CURSOR", id, resp.StatusCode, body)
			}

			client := startSSE(t, dir, srv.URL+"/v1/events", "ck_dev_bob", id)
			events, l := client.until("error")
			if len(events) != 0 || l.Code == nil || *l.Code != 400 || !l.Closed {
				t.Errorf("eventsource with Last-Event-ID %q: events %v, then %+v; want a closed connection on 400", id, events, l)
			}
		})
	}
}
