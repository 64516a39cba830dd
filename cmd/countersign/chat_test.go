package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/countersign/countersign/agui/event"
	"github.com/countersign/countersign/internal/plaintext"
)

// cliIn runs the client with stdin and returns its output and exit code.
func cliIn(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
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

var proposalID = regexp.MustCompile(`proposal (prp_[0-9a-f]+)`)

// TestChatWithTheDemo drives the demo's scripted agent with the chat
// command: alice's message streams the run (the assistant's text, the
// refund call, its pending receipt); bob's "yes" in her thread decides it;
// repeating and contradicting the decision answer as the server does; and
// a script's lines are sent one by one.
func TestChatWithTheDemo(t *testing.T) {
	s := startServer(t, "--store", "sqlite:"+filepath.Join(t.TempDir(), "chat.db"))
	srv := []string{"--server", s.base}
	chat := func(token string, args ...string) []string {
		return append(append([]string{"chat"}, args...), append([]string{"--token", token}, srv...)...)
	}

	out, code := cli(t, chat("ck_dev_alice", "c1", "refund 40 EUR to c_9")...)
	want := []string{
		"assistant: I'll ask for that refund.\n",
		"tool call: payments.refund {\"amount\":40,\"customer\":\"c_9\"}\n",
		"tool result: pending: Refund 40 EUR to c_9 (proposal prp_",
	}
	if code != 0 || !inOrder(out, want...) {
		t.Fatalf("alice's message: exit %d, output:\n%s\nwant, in order, %q", code, out, want)
	}
	id := proposalID.FindStringSubmatch(out)[1]

	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"bob says yes", chat("ck_dev_bob", "c1", "yes"), 0,
			[]string{"Proposal approved and queued to run. (proposal " + id + " is now approved)"}},
		{"bob says yes again, naming it", chat("ck_dev_bob", "c1", "yes #"+id), 0, []string{id}},
		{"carol says no, too late", chat("ck_dev_carol", "c1", "no #"+id), exitRefused, []string{"conflict"}},
		{"bob may not chat in alice's thread", chat("ck_dev_bob", "c1", "hello"), exitForbidden, []string{"403"}},
		{"no such agent", chat("ck_dev_alice", "c1", "hello", "--agent", "nope"), exitError, []string{"no agent named nope"}},
		{"bad token", chat("nope", "c1", "hello"), exitUnauth, []string{"401"}},
		{"no thread", chat("ck_dev_alice"), exitUsage, []string{"THREAD"}},
		{"an unquoted message", chat("ck_dev_alice", "c1", "refund", "40"), exitUsage, []string{"quote the message"}},
	}
	for _, tc := range cases {
		out, code := cli(t, tc.args...)
		if code != tc.code || !inOrder(out, tc.want...) {
			t.Errorf("%s: exit %d, output %q; want exit %d and %q", tc.name, code, out, tc.code, tc.want)
		}
	}

	// --json: the events, one JSON object a line, from RUN_STARTED to
	// RUN_FINISHED.
	out, code = cli(t, chat("ck_dev_alice", "c1", "hello", "--json")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 {
		t.Fatalf("--json: exit %d, output:\n%s", code, out)
	}
	var types []string
	for _, l := range lines {
		e, err := event.Parse([]byte(l))
		if err != nil {
			t.Fatalf("--json printed %q: %v", l, err)
		}
		types = append(types, e.Type())
	}
	if types[0] != event.TypeRunStarted || types[len(types)-1] != event.TypeRunFinished || !strings.Contains(out, "I can refund payments") {
		t.Errorf("--json events %v:\n%s", types, out)
	}

	// Without MESSAGE and without a terminal: each line a message, in turn.
	out, code = cliIn(t, "hello\n\n  \nrefund 5 EUR to c_1\r\n", chat("ck_dev_alice", "c2")...)
	want = []string{"> hello\n", "assistant: I can refund payments", "> refund 5 EUR to c_1\n",
		"tool call: payments.refund {\"amount\":5,\"customer\":\"c_1\"}", "tool result: pending: Refund 5 EUR to c_1"}
	if code != 0 || !inOrder(out, want...) || strings.Count(out, "> ") != 2 {
		t.Errorf("two lines on stdin: exit %d, output:\n%s\nwant, in order, %q", code, out, want)
	}
	// A script stops at the first message that fails.
	out, code = cliIn(t, "hello\nhello again\n", chat("ck_dev_bob", "c2")...)
	if code != exitForbidden || strings.Contains(out, "hello again") {
		t.Errorf("a failing script: exit %d, output:\n%s", code, out)
	}
}

// inOrder reports whether s holds each of want, each after the one before.
func inOrder(s string, want ...string) bool {
	for _, w := range want {
		i := strings.Index(s, w)
		if i < 0 {
			return false
		}
		s = s[i+len(w):]
	}
	return true
}

// TestChatInteractive runs the interactive session against the demo: alice
// sees her refund's proposal pending before her next prompt; bob, in her
// thread, sees it before his first, answers "yes", and is told the result.
func TestChatInteractive(t *testing.T) {
	s := startServer(t, "--store", "sqlite:"+filepath.Join(t.TempDir(), "interactive.db"))
	session := func(token string) (*chatSession, *bytes.Buffer) {
		c, err := newClient(s.base, token)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		return &chatSession{c: c, thread: "i1", out: &out, errOut: &out, watched: map[string]string{}}, &out
	}
	ctx := context.Background()

	alice, out := session("ck_dev_alice")
	if err := alice.converse(ctx, strings.NewReader("refund 40 EUR to c_9\n")); err != nil {
		t.Fatalf("alice: %v\n%s", err, out)
	}
	want := []string{"thread i1: type a message", "> ", "assistant: I'll ask for that refund.",
		"tool result: pending: Refund 40 EUR to c_9",
		"pending approval: Refund 40 EUR to c_9 (proposal prp_", "approvers role:finance", "answer yes or no)\n", "> \n"}
	if !inOrder(out.String(), want...) {
		t.Fatalf("alice's session:\n%s\nwant, in order, %q", out, want)
	}
	id := proposalID.FindStringSubmatch(out.String())[1]

	bob, out := session("ck_dev_bob")
	if err := bob.converse(ctx, strings.NewReader("yes\n")); err != nil {
		t.Fatalf("bob: %v\n%s", err, out)
	}
	want = []string{"pending approval: Refund 40 EUR to c_9 (proposal " + id, "> ",
		"Proposal approved and queued to run. (proposal " + id + " is now approved)\n", "> \n"}
	if !inOrder(out.String(), want...) || strings.Contains(out.String(), "is now approved\n") {
		t.Fatalf("bob's session:\n%s\nwant, in order, %q, and the approval told once", out, want)
	}

	// An error is printed and the session goes on.
	bob, out = session("ck_dev_bob")
	if err := bob.converse(ctx, strings.NewReader("hello\nyes #"+id+"\n")); err != nil {
		t.Fatalf("bob again: %v\n%s", err, out)
	}
	if !inOrder(out.String(), "countersign: forbidden (403)", "> ", "(proposal "+id+" is now") {
		t.Fatalf("bob's second session:\n%s", out)
	}
}

// cancelOnPrompt cancels a context once the session prompts: Ctrl-C at
// the prompt.
type cancelOnPrompt struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnPrompt) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte("> ")) {
		w.cancel()
	}
	return w.buf.Write(p)
}

// Ctrl-C at the prompt ends the session, while the read of a line blocks.
func TestChatInteractiveInterrupted(t *testing.T) {
	t.Parallel()
	srv := fakeChat(t, http.StatusOK, "application/json", `{"proposals":[]}`)
	c, err := newClient(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOnPrompt{cancel: cancel}
	pr, pw := io.Pipe() // a terminal nobody types on
	defer pw.Close()
	s := &chatSession{c: c, thread: "t1", out: out, errOut: out, watched: map[string]string{}}
	if err := s.converse(ctx, pr); err != nil {
		t.Fatalf("converse: %v", err)
	}
}

// sse frames each event as the server does.
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

const (
	evStarted  = `{"type":"RUN_STARTED","threadId":"t1","runId":"r1","protocolVersion":"1.0"}`
	evFinished = `{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","outcome":{"type":"success"}}`
)

func evText(id, text string) []string {
	delta, _ := json.Marshal(text)
	return []string{`{"type":"TEXT_MESSAGE_START","messageId":"` + id + `","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"` + id + `","delta":` + string(delta) + `}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"` + id + `"}`}
}

func evCall(id, action, args string) []string {
	delta, _ := json.Marshal(args)
	return []string{`{"type":"TOOL_CALL_START","toolCallId":"` + id + `","toolCallName":"` + action + `"}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"` + id + `","delta":` + string(delta) + `}`,
		`{"type":"TOOL_CALL_END","toolCallId":"` + id + `"}`}
}

func evResult(callID string, content any) string {
	c, _ := json.Marshal(content)
	quoted, _ := json.Marshal(string(c))
	return `{"type":"TOOL_CALL_RESULT","messageId":"m_r","toolCallId":"` + callID + `","content":` + string(quoted) + `}`
}

func cat(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			out = append(out, p)
		case []string:
			out = append(out, p...)
		}
	}
	return out
}

// fakeChat is a server that answers every request with status, content
// type and body, after checking that a message is posted as the chat route
// takes it.
func fakeChat(t *testing.T, status int, ctype, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			var req map[string]any
			dec := json.NewDecoder(r.Body)
			if r.URL.Path != "/v1/threads/t1/messages" || r.Header.Get("Accept") != "text/event-stream" ||
				r.Header.Get("Authorization") != "Bearer tok" || dec.Decode(&req) != nil || req["text"] == nil {
				http.Error(w, "not a chat message", http.StatusTeapot)
				return
			}
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// runChat runs `chat t1 MESSAGE` in this process against url, and returns
// what it printed (the error as main prints it) and its exit code.
func runChat(t *testing.T, url string, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	root := rootCmd()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(append(append([]string{"chat", "t1"}, args...), "--server", url, "--token", "tok"))
	err := root.ExecuteContext(context.Background())
	if err == nil {
		return out.String(), 0
	}
	if msg := err.Error(); msg != "" {
		out.WriteString("countersign: " + msg + "\n")
	}
	return out.String(), exitCode(err)
}

// TestChatAnswers: each answer the chat route can give, and the hostile
// streams a server or a proxy could send, printed or refused clearly, with
// the right exit code.
func TestChatAnswers(t *testing.T) {
	t.Parallel()
	stream := "text/event-stream"
	interrupt := `{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","outcome":{"type":"interrupt","interrupts":[` +
		`{"id":"prp_1","reason":"tool_call","toolCallId":"c1","message":"Refund 40 EUR to c_9","expiresAt":"2026-03-01T12:00:00Z"}]}}`
	huge := "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"" + strings.Repeat("x", event.MaxFrameBytes+1) + "\"}\n\n"
	cases := []struct {
		name   string
		status int
		ctype  string
		body   string
		args   []string
		code   int
		want   []string
	}{
		{"a run that waits for approval", 200, stream,
			sse(cat(evStarted, evText("m1", "I'll ask."), evCall("c1", "payments.refund", `{"amount": 40, "customer": "c_9"}`), interrupt)...),
			nil, 0, []string{"assistant: I'll ask.\n", "tool call: payments.refund {\"amount\":40,\"customer\":\"c_9\"}\n",
				"waiting for approval: Refund 40 EUR to c_9 (proposal prp_1, answer yes/no)\n"}},
		{"a run that executed its call", 200, stream,
			sse(cat(evStarted, evCall("c1", "payments.refund", `{}`),
				evResult("c1", map[string]any{"status": "succeeded", "receipt": "rf_1", "summary": "Refunded."}),
				evText("m2", "Done.\nAnything else?"), evFinished)...),
			nil, 0, []string{"tool call: payments.refund {}\n", "tool result: succeeded: Refunded. (receipt rf_1)\n",
				"assistant: Done.\n  Anything else?\n"}},
		{"a tool result that is not JSON", 200, stream,
			sse(cat(evStarted, evCall("c1", "crm.lookup", `{}`), evResult("c1", "plain words"), evFinished)...),
			nil, 0, []string{`tool result: "plain words"`}},
		{"heartbeats and CRLF", 200, stream,
			": ping\r\n\r\n" + strings.ReplaceAll(sse(evStarted)+": ping\n\n"+sse(cat(evText("m1", "hi"), evFinished)...), "\n", "\r\n"),
			nil, 0, []string{"assistant: hi\n"}},
		{"a run that failed", 200, stream,
			sse(cat(evStarted, evText("m1", "Let me see."), `{"type":"RUN_ERROR","message":"the model is down","code":"RUN_FAILED"}`)...),
			nil, exitError, []string{"assistant: Let me see.\n", "countersign: run r1 failed (RUN_FAILED): the model is down"}},
		{"a run that failed before it began", 200, stream, sse(`{"type":"RUN_ERROR","message":"no"}`),
			nil, exitError, []string{"countersign: the run failed: no"}},
		{"the thread is busy", 409, "application/json",
			`{"error":{"code":"THREAD_BUSY","message":"run run_7 holds thread t1; wait for it to end or cancel it"}}`,
			nil, exitRefused, []string{"countersign: refused (409): run run_7 holds thread t1"}},
		{"a text decision", 200, "application/json",
			`{"thread_id":"t1","proposal_decision":{"status":"applied","proposal":{"id":"prp_1","status":"approved"}},"text":"Proposal approved and queued to run."}`,
			[]string{"yes"}, 0, []string{"Proposal approved and queued to run. (proposal prp_1 is now approved)\n"}},
		{"a text decision too late", 200, "application/json",
			`{"thread_id":"t1","proposal_decision":{"status":"expired","proposal":{"id":"prp_1","status":"expired"}},"text":"Too late."}`,
			[]string{"yes"}, exitRefused, []string{"Too late.", "countersign: expired"}},
		{"an ambiguous decision", 200, "application/json",
			`{"thread_id":"t1","proposal_decision":null,"pending":["prp_1","prp_2"],"text":"Which one? Add #id."}`,
			[]string{"yes"}, exitRefused, []string{"Which one? Add #id.\n", "prp_1, prp_2 are pending"}},
		{"a message stored for an external agent", 202, "application/json",
			`{"thread_id":"t1","message":{"id":"msg_1","role":"user","text":"hi","created_at":"2026-03-01T12:00:00Z"},"run":null}`,
			nil, 0, []string{"message msg_1 stored in thread t1; no agent runs here"}},
		{"a run answered whole", 200, "application/json",
			`{"thread_id":"t1","run":{"id":"r1","status":"finished"},"messages":[{"id":"u","role":"user","text":"hi"},` +
				`{"id":"a","role":"assistant","text":"Hello.","tool_calls":[{"id":"c1","action":"crm.lookup","input":{"customer":"c_9"}}]},` +
				`{"id":"t","role":"tool","result":{"status":"succeeded","summary":"Found."}}]}`,
			nil, 0, []string{"assistant: Hello.\n", "tool call: crm.lookup {\"customer\":\"c_9\"}\n", "tool result: succeeded: Found.\n", "run r1 finished\n"}},
		{"--json: the events", 200, stream, sse(cat(evStarted, evText("m1", "hi"), evFinished)...),
			[]string{"--json"}, 0, cat(evStarted+"\n", evText("m1", "hi")[1]+"\n", evFinished+"\n")},
		{"--json: an answer", 202, "application/json", `{"thread_id":"t1","message":{"id":"msg_1"},"run":null}`,
			[]string{"--json"}, 0, []string{`"thread_id": "t1"`}},
		{"--agent is sent", 200, stream, sse(evStarted, evFinished), []string{"--agent", "support"}, 0, nil},

		// Hostile streams.
		{"a garbage frame", 200, stream, sse(evStarted, "not json at all"), nil, exitError,
			[]string{"countersign: the server's event 1 is not one this client reads: not a JSON object"}},
		{"an unknown event", 200, stream, sse(evStarted, `{"type":"SELF_DESTRUCT"}`), nil, exitError,
			[]string{`unknown event type "SELF_DESTRUCT"`}},
		{"an event with a field it does not have", 200, stream, sse(`{"type":"RUN_STARTED","threadId":"t1","runId":"r1","protocolVersion":"1.0","x":1}`),
			nil, exitError, []string{`unknown field "x"`}},
		{"an unterminated frame", 200, stream, sse(evStarted) + "data: " + evFinished, nil, exitError,
			[]string{"countersign: the event stream of run r1 broke: 1 events in: frame 0: the stream ends inside a frame"}},
		{"a huge frame", 200, stream, huge, nil, exitError, []string{"countersign: the event stream of the run broke: frame 0: a line over"}},
		{"a huge line that never ends", 200, stream, "data: " + strings.Repeat("y", 2*event.MaxFrameBytes), nil, exitError,
			[]string{"broke: event 0: over"}},
		{"a stream that stops inside the run", 200, stream, sse(cat(evStarted, evText("m1", "half"))...), nil, exitError,
			[]string{"assistant: half\n", "countersign: the event stream ended before run r1 did; GET /v1/threads/t1"}},
		{"an empty stream", 200, stream, "", nil, exitError, []string{"ended before the run did"}},
		{"events out of order", 200, stream, sse(evText("m1", "hi")...), nil, exitError,
			[]string{"breaks AG-UI's rules", "must begin with RUN_STARTED"}},
		{"a finish of another run", 200, stream, sse(evStarted, strings.Replace(evFinished, "r1", "r2", 1)), nil, exitError,
			[]string{"breaks AG-UI's rules"}},
		{"a tool call left open", 200, stream, sse(cat(evStarted, evCall("c1", "x", "{}")[:2], evFinished)...), nil, exitError,
			[]string{"tool calls still open"}},
		{"JSON that is not the answer", 200, "application/json", `{"thread_id": 7}`, nil, exitError,
			[]string{"decode the server's answer"}},
		{"a server error", 500, "text/plain", "boom", nil, exitError, []string{"(500): boom"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeChat(t, tc.status, tc.ctype, tc.body)
			args := tc.args
			if len(args) == 0 || strings.HasPrefix(args[0], "--") {
				args = append([]string{"hello"}, args...)
			}
			out, code := runChat(t, srv.URL, args...)
			if code != tc.code || !inOrder(out, tc.want...) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and, in order, %q", code, out, tc.code, tc.want)
			}
		})
	}
}

// TestChatEscapesTheStream: whatever text the server streams (the
// assistant's, a tool's, an interrupt's title, an error's) reaches the
// terminal with no character it obeys, and the assistant's lines cannot
// pass for the client's own.
func TestChatEscapesTheStream(t *testing.T) {
	t.Parallel()
	title, _ := json.Marshal(hostile)
	interrupt := `{"type":"RUN_FINISHED","threadId":"t1","runId":"r1","outcome":{"type":"interrupt","interrupts":[` +
		`{"id":"prp_1","reason":"tool_call","message":` + string(title) + `}]}}`
	bodies := map[string]string{
		"run": sse(cat(evStarted, evText("m1", hostile+"\nwaiting for approval: forged (proposal prp_x, answer yes/no)"),
			evCall("c1", "payments."+hostile, `{"k":`+string(title)+`}`),
			evResult("c1", map[string]any{"status": "pending" + hostile, "summary": hostile, "proposal_id": hostile}),
			interrupt)...),
		"error": sse(evStarted, `{"type":"RUN_ERROR","message":`+string(title)+`,"code":`+string(title)+`}`),
	}
	for name, body := range bodies {
		srv := fakeChat(t, 200, "text/event-stream", body)
		out, _ := runChat(t, srv.URL, "hello")
		if !strings.Contains(out, "x") {
			t.Fatalf("%s: nothing printed:\n%s", name, out)
		}
		for _, bad := range unsafeInOutput {
			if strings.Contains(out, bad) {
				t.Errorf("%s: output carries %q unescaped:\n%s", name, bad, out)
			}
		}
		if strings.Contains(out, "\nwaiting for approval: forged") {
			t.Errorf("%s: the assistant's text passes for the client's line:\n%s", name, out)
		}
	}
}

// TestFrameReaderMatchesDecodeFrames: handing a stream over event by event
// yields exactly the events event.DecodeFrames reads from it whole, and an
// error where it finds one.
func TestFrameReaderMatchesDecodeFrames(t *testing.T) {
	t.Parallel()
	for _, in := range frameSeeds {
		checkFrames(t, in)
	}
}

var frameSeeds = []string{
	"", "\n", "data: a\n\n", "data: a\r\n\r\ndata: b\n\n", "data: a\rdata: b\r\r", "data: a\r\r\ndata: b\n\n",
	"\ufeffdata: a\n\n", "\n\ufeffdata: a\n\n", ": ping\n\ndata: x\ndata: y\n\n", "event: e\nid: 1\ndata\n\n",
	"data: unterminated", "data: a\n", "data: a\n\r", "\r\n\r\ndata: z\n\n\n\n", sse(evStarted, evFinished),
}

func checkFrames(t *testing.T, in string) {
	t.Helper()
	want, wantErr := event.DecodeFrames(strings.NewReader(in))
	fr := newFrameReader(iotest.OneByteReader(strings.NewReader(in))) // as a slow connection delivers it
	var got [][]byte
	var err error
	for {
		var frames [][]byte
		frames, err = fr.next()
		got = append(got, frames...)
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if (err != nil) != (wantErr != nil) || (len(got) > 0 || len(want) > 0) && !reflect.DeepEqual(got, want) {
		t.Fatalf("stream %q: frames %q, %v; DecodeFrames reads %q, %v", in, got, err, want, wantErr)
	}
}

// FuzzChatStream: whatever a server streams, the client neither panics nor
// prints a character a terminal obeys, and it splits the stream into the
// events event.DecodeFrames reads.
func FuzzChatStream(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add(s)
	}
	f.Add(sse(cat(evStarted, evText("m1", hostile), evCall("c1", "a", "{}"), evResult("c1", hostile), evFinished)...))
	f.Fuzz(func(t *testing.T, in string) {
		checkFrames(t, in)
		var out bytes.Buffer
		s := &chatSession{thread: "t1", out: &out, errOut: &out}
		err := s.follow(context.Background(), strings.NewReader(in))
		printed := out.String()
		if err != nil {
			printed += err.Error()
		}
		if strings.ContainsFunc(printed, func(r rune) bool { return r != '\n' && plaintext.Escaped(r) }) {
			t.Fatalf("printed an unsafe character: %q", printed)
		}
	})
}
