package server

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
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
