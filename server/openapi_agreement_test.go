package server

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
)

// documentAdmits reports whether the OpenAPI document admits the request
// (nil) or why not.
func documentAdmits(t testing.TB, method, path string, body []byte) error {
	t.Helper()
	_, router, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	r, err := http.NewRequest(method, "http://localhost"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer x")
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	route, params, err := router.FindRoute(r)
	if err != nil {
		t.Fatalf("%s %s: no documented route: %v", method, path, err)
	}
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
}

// TestDocumentAgreesWithServer holds the findings of Schemathesis'
// positive_data_acceptance and negative_data_rejection checks
// (test/schemathesis, docs/api-testing.md): each row is a request on one
// side of a bound, sent through the real handler, and the document must
// admit it exactly when the server accepts it. Before the fixes the
// document admitted an audit seq past int64 (the server answers 400), an
// empty AG-UI threadId or runId (400: required), and any string as a
// listing's status (400: unknown status).
func TestDocumentAgreesWithServer(t *testing.T) {
	rows := []struct {
		name, method, path, token string
		body                      string
		accepted                  bool
	}{
		{"audit after at int64's top", "GET", "/v1/audit?after=9223372036854775807", "carol", "", true},
		{"audit after past int64", "GET", "/v1/audit?after=9223372036854775808", "carol", "", false},
		{"audit after far past int64", "GET", "/v1/audit?after=32589158477190044731", "carol", "", false},
		{"checkpoints after at int64's top", "GET", "/v1/audit/checkpoints?after=9223372036854775807", "carol", "", true},
		{"checkpoints after past int64", "GET", "/v1/audit/checkpoints?after=9223372036854775808", "carol", "", false},
		{"agui empty threadId", "POST", "/v1/agui", "alice", `{"threadId":"","runId":"r","messages":[]}`, false},
		{"agui empty runId", "POST", "/v1/agui/demo", "alice", `{"threadId":"t","runId":"","messages":[]}`, false},
		{"status one", "GET", "/v1/proposals?status=pending", "alice", "", true},
		{"status list", "GET", "/v1/proposals?status=pending,approved,cancelled", "alice", "", true},
		{"status list with empty parts", "GET", "/v1/proposals?status=,pending,,", "alice", "", true},
		{"status unknown", "GET", "/v1/proposals?status=%10_%10", "alice", "", false},
		{"status unknown in a list", "GET", "/v1/proposals?status=pending,done", "alice", "", false},
		{"status with a space", "GET", "/v1/proposals?status=pending,%20approved", "alice", "", false},
	}
	// kin-openapi reads an integer parameter into an int64 and refuses what
	// does not fit, so it rejects after=2^63 whatever the document says;
	// a validator with integers of any size (Schemathesis') needs the
	// maximum spelled out.
	doc, _, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/audit", "/v1/audit/checkpoints"} {
		p := doc.Paths.Value(path).Get.Parameters.GetByInAndName("query", "after")
		if p == nil || p.Schema.Value.Max == nil || *p.Schema.Value.Max != math.MaxInt64 {
			t.Errorf("GET %s: after has no maximum of %d (int64's top, a seq's)", path, int64(math.MaxInt64))
		}
	}
	h := newHarness(t, "mem", harnessOptions{})
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			var body []byte
			var reqBody any
			if row.body != "" {
				body = []byte(row.body)
				reqBody = body
			}
			docErr := documentAdmits(t, row.method, row.path, body)
			if (docErr == nil) != row.accepted {
				t.Errorf("the document admits it: %v (%v), want %v", docErr == nil, docErr, row.accepted)
			}
			resp := h.do(req{method: row.method, path: row.path, token: row.token, body: reqBody, invalid: !row.accepted})
			switch {
			case row.accepted && resp.status == 400:
				t.Errorf("status 400, want it accepted: %s", resp.body)
			case !row.accepted && resp.status != 400:
				t.Errorf("status %d, want 400: %s", resp.status, resp.body)
			}
		})
	}
}

// TestOpenAPIPathParametersNonEmpty checks that every path parameter
// admits no empty string: an empty segment never reaches its operation
// (/v1/threads/t/runs//cancel is not the run cancel: net/http cleans the
// path to /v1/threads/t/runs/cancel, the run read, which answers POST with
// 405). Schemathesis' stateful phase built that URL from an empty value
// while the document allowed one, and reported the 405 as undocumented.
func TestOpenAPIPathParametersNonEmpty(t *testing.T) {
	doc, _, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range append(item.Parameters, op.Parameters...) {
				if p.Value == nil || p.Value.In != "path" {
					continue
				}
				n++
				if s := p.Value.Schema; s == nil || s.Value.MinLength < 1 {
					t.Errorf("%s %s: path parameter %s admits the empty string", method, path, p.Value.Name)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d path parameters: the scan is broken", n)
	}
}
