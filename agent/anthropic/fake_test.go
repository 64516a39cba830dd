package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The SDK must not pick these up: the composition root passes what
	// it needs. Setting them makes every test check that it does not.
	os.Setenv("ANTHROPIC_API_KEY", "sk-from-the-environment")
	os.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-the-environment")
	os.Setenv("ANTHROPIC_BASE_URL", "http://192.0.2.1:1")
	os.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-From-Env: yes")
	goleak.VerifyTestMain(m)
}

// testKey is the API key the tests' models send; long enough to be
// redacted from error texts.
const testKey = "sk-test-0123456789abcdef"

// fakeAPI is an httptest server that speaks the Messages wire format: it
// records each request and answers with respond.
type fakeAPI struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []recorded
}

// recorded is one request the fake API received.
type recorded struct {
	method string
	path   string
	header http.Header
	body   []byte
}

// respondFunc answers the n-th request (from 0).
type respondFunc func(n int, w http.ResponseWriter, r *http.Request)

func newFakeAPI(t testing.TB, respond respondFunc) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.requests)
		f.requests = append(f.requests, recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
		f.mu.Unlock()
		respond(n, w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// model returns a Model on the fake API with opts (Model, BaseURL,
// APIKey and HTTPClient filled in where empty).
func (f *fakeAPI) model(t testing.TB, opts Options) *Model {
	t.Helper()
	if opts.Model == "" {
		opts.Model = "claude-test"
	}
	if opts.BaseURL == "" {
		opts.BaseURL = f.srv.URL
	}
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = f.srv.Client()
	}
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func (f *fakeAPI) received() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.requests...)
}

// reply answers with a JSON body and status.
func reply(status int, body string) respondFunc {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, status, body)
	}
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	// Retries wait a millisecond, not the SDK's half-second backoff.
	w.Header().Set("Retry-After-Ms", "1")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// message is a Messages reply with the given content and stop reason.
func message(stop, content string) string {
	return `{"id":"msg_test","type":"message","role":"assistant","model":"claude-test",` +
		`"content":` + content + `,"stop_reason":"` + stop + `","stop_sequence":null,` +
		`"usage":{"input_tokens":10,"output_tokens":5}}`
}

// wireRequest is a Messages request as the tests read it.
type wireRequest struct {
	Model     string        `json:"model"`
	MaxTokens int           `json:"max_tokens"`
	System    []wireBlock   `json:"system"`
	Messages  []wireMessage `json:"messages"`
	Tools     []wireTool    `json:"tools"`
}

type wireMessage struct {
	Role    string      `json:"role"`
	Content []wireBlock `json:"content"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   []wireBlock     `json:"content"`
	IsError   *bool           `json:"is_error"`
}

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func decodeRequest(t testing.TB, body []byte) wireRequest {
	t.Helper()
	var req wireRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		t.Fatalf("the request body is not a Messages request: %v\n%s", err, body)
	}
	return req
}

// sameJSON reports whether a and b are the same JSON value (numbers
// compared as written).
func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	da := json.NewDecoder(bytes.NewReader(a))
	da.UseNumber()
	db := json.NewDecoder(bytes.NewReader(b))
	db.UseNumber()
	if err := da.Decode(&va); err != nil {
		t.Fatalf("not JSON: %v: %s", err, a)
	}
	if err := db.Decode(&vb); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
