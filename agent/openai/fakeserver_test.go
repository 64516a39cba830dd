package openai_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/openai"
)

// testKey is the API key the tests' models send.
const testKey = "sk-test-7f3a9c2e"

// seenRequest is one request the fake server received.
type seenRequest struct {
	method, path, auth string
	header             http.Header
	body               []byte
}

// decoded is the request's JSON body, numbers kept as written.
func (r seenRequest) decoded(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := decodeNumbers(r.body, &m); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, r.body)
	}
	return m
}

// fakeServer speaks the chat-completions wire format on loopback: each
// request is recorded, then answered by reply with the attempt's number
// (0 for the first request).
type fakeServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

func newFakeServer(t *testing.T, reply func(n int, w http.ResponseWriter, r *http.Request)) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.seen)
		f.seen = append(f.seen, seenRequest{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"), header: r.Header.Clone(), body: body})
		f.mu.Unlock()
		reply(n, w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// model is a Model on f: base URL f's "/v1", the test key, and retries
// that wait a millisecond (the fake server's Retry-After-Ms says so).
func (f *fakeServer) model(t *testing.T, edit func(*openai.Options)) *openai.Model {
	t.Helper()
	opts := openai.Options{
		Model:      "gpt-test",
		BaseURL:    f.URL + "/v1",
		APIKey:     testKey,
		HTTPClient: f.Client(),
		Timeout:    10 * time.Second,
	}
	if edit != nil {
		edit(&opts)
	}
	m, err := openai.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writeJSON answers with status and body as application/json.
func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// completion is a chat-completion body whose one choice has message.
func completion(message, finish string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test",` +
		`"choices":[{"index":0,"finish_reason":"` + finish + `","logprobs":null,"message":` + message + `}]}`
}

// toolCallMessage is an assistant message calling name with args (a JSON
// string's contents, already escaped).
func toolCallMessage(id, name, args string) string {
	return `{"role":"assistant","content":null,"tool_calls":[{"id":"` + id + `","type":"function",` +
		`"function":{"name":"` + name + `","arguments":` + args + `}}]}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// decodeNumbers is json.Unmarshal with numbers kept as json.Number.
func decodeNumbers(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}
