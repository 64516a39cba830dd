package server

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"
)

// fuzzServer is a server on the memory store, called without a network,
// whose long-polls end at once.
func fuzzServer(f *testing.F) *Server {
	h := newHarness(f, "mem", harnessOptions{})
	h.srv.waitCap = 5 * time.Millisecond
	return h.srv
}

// serve runs one request through the handler and fails on a 500 (a panic
// answers 500 too) or an answer that is not one of docs/api.md's shapes.
func serve(t *testing.T, s *Server, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, r)
	if rec.Code >= 500 {
		t.Fatalf("%s %s: %d %s", r.Method, r.URL, rec.Code, rec.Body.Bytes())
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s %s: %d, not a JSON object: %q", r.Method, r.URL, rec.Code, rec.Body.Bytes())
	}
	if rec.Code == 200 {
		return rec
	}
	e, _ := body["error"].(map[string]any)
	if code, _ := e["code"].(string); code == "" {
		t.Fatalf("%s %s: %d without an error code: %s", r.Method, r.URL, rec.Code, rec.Body.Bytes())
	}
	return rec
}

func post(path, token string, body []byte) *http.Request {
	r := httptest.NewRequest("POST", path, bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	return r
}

// withDuplicate turns body, a JSON object without duplicate keys, into one
// that repeats a key: the first key of the first member whose value is a
// non-empty object, else the first top-level key. It returns that key's
// path, or false when body is not such an object (or would grow too large).
func withDuplicate(body []byte) ([]byte, string, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil || fields == nil || len(fields) == 0 || hasDuplicate(body) || len(body) > MaxBodyBytes/4 {
		return nil, "", false
	}
	keys := slices.Sorted(maps.Keys(fields))
	for _, k := range keys {
		var inner map[string]json.RawMessage
		v := bytes.TrimSpace(fields[k])
		if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &inner) != nil || len(inner) == 0 {
			continue
		}
		ik := slices.Sorted(maps.Keys(inner))[0]
		name, _ := json.Marshal(ik)
		fields[k] = append(append(append([]byte("{"), name...), ':'), append(append([]byte(inner[ik]), ','), v[1:]...)...)
		b, err := json.Marshal(fields)
		if err != nil {
			return nil, "", false
		}
		return b, k + "." + ik, true
	}
	name, _ := json.Marshal(keys[0])
	b := append(append(append([]byte("{"), name...), ':'), fields[keys[0]]...)
	return append(append(b, ','), bytes.TrimLeft(body, " \t\r\n")[1:]...), keys[0], true
}

func hasDuplicate(body []byte) bool {
	_, ok := duplicateKey(body)
	return ok
}

// refusesDuplicate sends body with a key repeated (see withDuplicate) and
// fails unless the answer is 400 INVALID_BODY naming that key.
func refusesDuplicate(t *testing.T, s *Server, r func(body []byte) *http.Request, body []byte) {
	t.Helper()
	dup, path, ok := withDuplicate(body)
	if !ok {
		return
	}
	rec := serve(t, s, r(dup))
	var ans struct {
		Error struct {
			Code    string    `json:"code"`
			Details []problem `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &ans)
	if rec.Code != 400 || ans.Error.Code != CodeInvalidBody || len(ans.Error.Details) == 0 || ans.Error.Details[0].Path != path {
		t.Fatalf("%s with %s repeated: %d %s", dup, path, rec.Code, rec.Body.Bytes())
	}
}

func FuzzCallBody(f *testing.F) {
	for _, seed := range []string{
		`{"thread_id":"t1","tool_call_id":"c1","action":"notes.read","input":{"id":"n"}}`,
		`{"thread_id":"t1","tool_call_id":"c2","action":"payments.refund","input":{"amount":1,"customer":"c"},"wait_seconds":0}`,
		`{"thread_id":"t1","tool_call_id":"c3","action":"payments.refund","input":{"amount":1,"customer":"c"},"mode":"two_phase","evidence":"cnf_x"}`,
		`{"thread_id":"t1","tool_call_id":"c4","action":"payments.refund","input":{"amount":1,"customer":"c"},"mode":"independent"}`,
		`{"thread_id":"t1","tool_call_id":"c5","action":"danger.delete","input":{}}`,
		`{"thread_id":"t1","tool_call_id":"c6","action":"payments.refund","input":{"amount":"x"}}`,
		`{"thread_id":"","tool_call_id":"c7","action":"x","input":null}`,
		`{"thread_id":1}`, `{"wait_seconds":1e999}`, `{"wait_seconds":-0}`, `{"input":`, `[]`, `null`, ``, `{} {}`,
		`{"thread_id":"t1","tool_call_id":"c8","action":"notes.read","input":{"id":"n"},"THREAD_ID":"x"}`,
		"{\"thread_id\":\"\xff\",\"tool_call_id\":\"c9\",\"action\":\"notes.read\",\"input\":{\"id\":\"\x00\"}}",
		`{"thread_id":"t1","thread_id":"t2","tool_call_id":"c10","action":"notes.read","input":{"id":"n"}}`,
		`{"thread_id":"t1","tool_call_id":"c11","action":"payments.refund","input":{"amount":1,"customer":"c","amount":-5}}`,
		`{"thread_id":"t1","tool_call_id":"c12","action":"notes.read","input":{"id":"n","x":[{"a":1,"\u0061":2}]}}`,
	} {
		f.Add([]byte(seed))
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		serve(t, s, post("/v1/calls", "alice", body))
		refusesDuplicate(t, s, func(b []byte) *http.Request { return post("/v1/calls", "alice", b) }, body)
	})
}

func FuzzDecisionBody(f *testing.F) {
	for _, seed := range []string{
		`{"reason":"ok"}`, `{"reason":"ok","remember":"thread"}`, `{"remember":"run"}`, `{"remember":"x"}`,
		`{"outcome":"succeeded","note":"n","receipt":"r"}`, `{"outcome":"failed"}`, `{"note":1}`,
		`{"reason":null}`, ``, `{}`, `{"reason":"a"}x`, `[]`, `"x"`, `{"reason":{"a":1}}`,
		`{"reason":"a","reason":"b"}`, `{"outcome":"failed","note":"n","outcome":"succeeded"}`, `{"reason":{"a":1,"a":2}}`,
	} {
		for v := range byte(12) {
			f.Add(v, []byte(seed))
		}
	}
	h := newHarness(f, "mem", harnessOptions{})
	h.srv.waitCap = 5 * time.Millisecond
	id := h.pending("fz_1", "c_fz")
	verbs := []string{"approve", "reject", "cancel", "resolve"}
	tokens := []string{"bob", "alice", "carol"}
	f.Fuzz(func(t *testing.T, v byte, body []byte) {
		r := post("/v1/proposals/"+id+"/"+verbs[int(v)%len(verbs)], tokens[int(v)/len(verbs)%len(tokens)], body)
		if v&0x80 != 0 {
			r.Header.Set(ViaHeader, string(body[:min(len(body), 8)]))
		}
		serve(t, h.srv, r)
		refusesDuplicate(t, h.srv, func(b []byte) *http.Request {
			return post("/v1/proposals/"+id+"/"+verbs[int(v)%len(verbs)], tokens[int(v)/len(verbs)%len(tokens)], b)
		}, body)
	})
}

func FuzzCursor(f *testing.F) {
	h := newHarness(f, "mem", harnessOptions{})
	for i := range 3 {
		h.pending("cur_"+string(rune('a'+i)), "c_cur_"+string(rune('a'+i)))
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/v1/proposals?limit=1", nil)
	r.Header.Set("Authorization", "Bearer bob")
	h.srv.Handler().ServeHTTP(rec, r)
	next, err := url.QueryUnescape(rec.Header().Get(NextHeader))
	if err != nil || next == "" {
		f.Fatalf("no cursor: %q %v", rec.Header().Get(NextHeader), err)
	}
	for _, seed := range []string{next, next[:len(next)-1], next + "A", "", "A", "%", "\x00", "====", "AAAA" + next} {
		for _, limit := range []string{"", "1", "1000", "0", "-1", "x", "99999999999999999999"} {
			f.Add(seed, limit)
		}
	}
	f.Fuzz(func(t *testing.T, after, limit string) {
		q := url.Values{}
		q.Set("after", after)
		if limit != "" {
			q.Set("limit", limit)
		}
		for _, path := range []string{"/v1/proposals", "/v1/threads/t1/proposals"} {
			r := httptest.NewRequest("GET", path+"?"+q.Encode(), nil)
			r.Header.Set("Authorization", "Bearer bob")
			rec := serve(t, h.srv, r)
			if rec.Code != 200 && rec.Code != 400 {
				t.Fatalf("after=%q limit=%q: %d %s", after, limit, rec.Code, rec.Body.Bytes())
			}
		}
	})
}
