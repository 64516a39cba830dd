package server

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/countersign/countersign/agui/event"
)

// FuzzMessageBody posts hostile bodies to the chat route, as the thread's
// owner and as an approver, with the demo's scripted agent configured: no
// answer is a 500 or a panic, and every answer is a JSON object (an error
// with a code, a decision, a run, or a stored message).
func FuzzMessageBody(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hello"}`, `{"text":"refund 40 EUR to c_9"}`, `{"text":"yes"}`, `{"text":"no #prp_x"}`,
		`{"text":"sim"}`, `{"text":"always in this conversation"}`, `{"text":"yes?"}`, `{"text":"\"yes\""}`,
		`{"text":""}`, `{"text":null}`, `{"text":1}`, `{"agent":"demo"}`, `{"text":"hi","agent":"nope"}`,
		`{"text":"hi","agent":""}`, `{"text":"hi","text":"yo"}`, `{}`, ``, `[]`, `null`, `{"text":"a"} x`,
		"{\"text\":\"\xff\xfe\"}", `{"text":"line\nline"}`, `{"text":"yes #` + "\u0000" + `"}`,
	} {
		f.Add(byte(0), []byte(seed))
		f.Add(byte(1), []byte(seed))
	}
	h, _ := chatHarness(f, "mem")
	f.Fuzz(func(t *testing.T, who byte, body []byte) {
		token := []string{"alice", "bob", "dave"}[int(who)%3]
		thread := []string{"t1", "t2"}[int(who>>2)%2]
		rec := httptest.NewRecorder()
		h.srv.Handler().ServeHTTP(rec, post("/v1/threads/"+thread+"/messages", token, body))
		if rec.Code >= 500 {
			t.Fatalf("%q as %s: %d %s", body, token, rec.Code, rec.Body.Bytes())
		}
		var answer map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
			t.Fatalf("%q as %s: %d, not a JSON object: %q", body, token, rec.Code, rec.Body.Bytes())
		}
		if rec.Code >= 400 {
			if e, _ := answer["error"].(map[string]any); e == nil || e["code"] == "" {
				t.Fatalf("%q as %s: %d without an error code: %s", body, token, rec.Code, rec.Body.Bytes())
			}
		}
	})
}

// FuzzAGUIInput posts hostile RunAgentInputs to the AG-UI endpoint: no
// answer is a 500 or a panic; a stream, once open, is AG-UI events that
// keep the protocol's ordering rules, however bad the input.
func FuzzAGUIInput(f *testing.F) {
	for _, seed := range []string{
		`{"threadId":"t1","runId":"r1","messages":[{"id":"m1","role":"user","content":"refund 40 EUR to c_9"}]}`,
		`{"threadId":"t1","runId":"r2","messages":[{"id":"m2","role":"user","content":"yes"}]}`,
		`{"threadId":"t1","runId":"r3","messages":[],"resume":[{"interruptId":"prp_x","status":"resolved","payload":{"approved":true}}]}`,
		`{"threadId":"t1","runId":"r4","messages":[],"resume":[{"interruptId":"","status":"other"}]}`,
		`{"threadId":"t1","runId":"r5","messages":[{"id":"m3","role":"user","content":[{"type":"text","text":"hi"}]}],"tools":[{"name":"x","description":"y"}]}`,
		`{"threadId":"t1","runId":"r6","messages":[{"role":"user"}]}`, `{"threadId":"","runId":""}`, `{"messages":1}`,
		`{"threadId":"t1","runId":"r7","messages":[{"id":"m4","role":"user","content":7}]}`, `[]`, ``, `null`,
		`{"threadId":"t2","runId":"r8","messages":[{"id":"m5","role":"user","content":"weather in Lisbon"}],"tools":[{"name":"get_weather","description":"w","parameters":{"type":"object"}}]}`,
		`{"threadId":"t2","runId":"r9","messages":[{"id":"m6","role":"tool","toolCallId":"call_1","content":"sunny"}],"tools":[]}`,
		`{"threadId":"t2","runId":"r10","messages":[{"id":"m7","role":"tool","toolCallId":"call_1","content":"x","error":"denied"},{"id":"m8","role":"user","content":"and?"}]}`,
		`{"threadId":"t2","runId":"r11","messages":[{"id":"m9","role":"user","content":"hi"}],"tools":[{"name":"a","parameters":null},{"name":"a"}]}`,
	} {
		f.Add(byte(0), []byte(seed))
	}
	h := aguiHarness(f)
	f.Fuzz(func(t *testing.T, who byte, body []byte) {
		token := []string{"alice", "bob"}[int(who)%2]
		rec := httptest.NewRecorder()
		h.srv.Handler().ServeHTTP(rec, post("/v1/agui", token, body))
		if rec.Code >= 500 {
			t.Fatalf("%q as %s: %d %s", body, token, rec.Code, rec.Body.Bytes())
		}
		if rec.Code != 200 {
			return
		}
		evs, err := event.Decode(bytes.NewReader(rec.Body.Bytes()))
		if err != nil {
			t.Fatalf("%q: the stream does not decode: %v\n%s", body, err, rec.Body.Bytes())
		}
		if err := event.Verify(evs); err != nil {
			t.Fatalf("%q: the stream breaks AG-UI's rules: %v\n%s", body, err, rec.Body.Bytes())
		}
	})
}
