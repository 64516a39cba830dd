// Package slacktest is for tests only: a local stand-in for Slack's Web
// API (the part the channel calls) that records every message as an
// approver would see it, and the signing and payloads of Slack's
// interaction requests. The channel's own tests and the cross-channel tests
// (cmd/countersign) use it; no production code imports it.
package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Server is a local stand-in for Slack's Web API, as much of it as the
// channel calls: chat.postMessage, chat.update and chat.delete, answered
// as Slack answers them, and the response_url of interactions
// (/actions/…), which records the ephemeral replies. It checks the bot
// token and records every call, so tests read what each approver sees.
type Server struct {
	t     testing.TB
	srv   *httptest.Server
	token string

	mu       sync.Mutex
	seq      int
	calls    []Call
	messages map[string]*Message // by channel + " " + ts
	replies  []Reply
	// failing: the next n calls of a method answer ok:false.
	failing map[string]int
	// held, when set, holds every chat.update until it is closed: what
	// the approvers see does not change meanwhile.
	held chan struct{}
}

// HoldUpdates holds chat.update calls until the returned func is called.
func (f *Server) HoldUpdates() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	held := make(chan struct{})
	f.held = held
	var once sync.Once
	return func() { once.Do(func() { close(held) }) }
}

// Call is one Web API call as the server took it.
type Call struct {
	Method  string
	Channel string
	TS      string
}

// Message is a message as it stands in Slack after the calls so far.
type Message struct {
	Channel string
	TS      string
	// To is the channel the post named: a user id for a direct message.
	To      string
	Text    string
	Blocks  []Block
	Updates int
	Deleted bool
}

// Block is the part of a Block Kit block the tests read.
type Block struct {
	Type   string          `json:"type"`
	Text   *Text           `json:"text"`
	Fields []Text          `json:"fields"`
	Elems  []Element       `json:"elements"`
	Raw    json.RawMessage `json:"-"`
}

// Text is a Block Kit text object.
type Text struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Verbatim bool   `json:"verbatim"`
}

// Element is a Block Kit element: a button, a link.
type Element struct {
	Type     string `json:"type"`
	ActionID string `json:"action_id"`
	Value    string `json:"value"`
	URL      string `json:"url"`
	Text     *Text  `json:"text"`
}

// Reply is one ephemeral reply posted to a response_url.
type Reply struct {
	Path            string
	ResponseType    string `json:"response_type"`
	ReplaceOriginal bool   `json:"replace_original"`
	Text            string `json:"text"`
}

// NewServer starts a fake Slack that accepts the bot token token, until
// the test ends.
func NewServer(t testing.TB, token string) *Server {
	f := &Server{t: t, token: token, messages: map[string]*Message{}, failing: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// APIURL is what Options.APIURL (channels.slack.api_url) names.
func (f *Server) APIURL() string { return f.srv.URL + "/api/" }

// ResponseURL is a response_url Slack would put in an interaction.
func (f *Server) ResponseURL(name string) string { return f.srv.URL + "/actions/" + name }

// Fail makes the next n calls of method answer ok:false.
func (f *Server) Fail(method string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing[method] += n
}

func (f *Server) answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/actions/") {
		var rep Reply
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		rep.Path = r.URL.Path
		f.mu.Lock()
		f.replies = append(f.replies, rep)
		f.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		f.answer(w, map[string]any{"ok": false, "error": "invalid_form_data"})
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if token != f.token {
		f.answer(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	f.mu.Lock()
	if held := f.held; held != nil && strings.HasSuffix(r.URL.Path, "/chat.update") {
		f.mu.Unlock()
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	channel, ts := r.PostForm.Get("channel"), r.PostForm.Get("ts")
	f.calls = append(f.calls, Call{Method: method, Channel: channel, TS: ts})
	if f.failing[method] > 0 {
		f.failing[method]--
		f.answer(w, map[string]any{"ok": false, "error": "service_unavailable"})
		return
	}
	var blocks []Block
	if raw := r.PostForm.Get("blocks"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
			f.answer(w, map[string]any{"ok": false, "error": "invalid_blocks"})
			return
		}
	}
	switch method {
	case "chat.postMessage":
		f.seq++
		posted := channel
		if strings.HasPrefix(channel, "U") {
			posted = "D" + channel[1:] // the bot's direct message with the user
		}
		m := &Message{Channel: posted, To: channel, TS: fmt.Sprintf("1700000000.%06d", f.seq), Text: r.PostForm.Get("text"), Blocks: blocks}
		f.messages[m.Channel+" "+m.TS] = m
		f.answer(w, map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS})
	case "chat.update":
		m, ok := f.messages[channel+" "+ts]
		if !ok || m.Deleted {
			f.answer(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		m.Text, m.Blocks = r.PostForm.Get("text"), blocks
		m.Updates++
		f.answer(w, map[string]any{"ok": true, "channel": channel, "ts": ts})
	case "chat.delete":
		if m, ok := f.messages[channel+" "+ts]; ok {
			m.Deleted = true
		}
		f.answer(w, map[string]any{"ok": true, "channel": channel, "ts": ts})
	default:
		f.answer(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// Count is how many calls of method were made.
func (f *Server) Count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.Method == method {
			n++
		}
	}
	return n
}

// Sent returns the live (not deleted) messages posted to to (a user or
// channel id), copies, oldest first.
func (f *Server) Sent(to string) []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Message
	for _, m := range f.messages {
		if m.To == to && !m.Deleted {
			out = append(out, *m)
		}
	}
	slices.SortFunc(out, func(a, b Message) int { return strings.Compare(a.TS, b.TS) })
	return out
}

// All returns every live message.
func (f *Server) All() []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Message
	for _, m := range f.messages {
		if !m.Deleted {
			out = append(out, *m)
		}
	}
	return out
}

// RepliesTo returns the ephemeral replies posted to a response_url.
func (f *Server) RepliesTo(name string) []Reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Reply
	for _, r := range f.replies {
		if r.Path == "/actions/"+name {
			out = append(out, r)
		}
	}
	return out
}

// Buttons are a message's elements with an action id, by action id.
func (m Message) Buttons() map[string]Element {
	out := map[string]Element{}
	for _, b := range m.Blocks {
		for _, e := range b.Elems {
			if e.Type == "button" {
				out[e.ActionID] = e
			}
		}
	}
	return out
}

// Shown is every text the message shows, joined.
func (m Message) Shown() string {
	var parts []string
	for _, b := range m.Blocks {
		if b.Text != nil {
			parts = append(parts, b.Text.Text)
		}
		for _, f := range b.Fields {
			parts = append(parts, f.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// FormBody is the form body Slack posts an interaction payload in.
func FormBody(payload []byte) string { return url.Values{"payload": {string(payload)}}.Encode() }
