package server

import (
	"encoding/json"
	"testing"
)

// TestOpenAPIDocument checks that the embedded document is valid OpenAPI
// 3.1 and that /openapi.json serves it.
func TestOpenAPIDocument(t *testing.T) {
	doc, _, err := spec()
	if err != nil {
		t.Fatalf("the OpenAPI document is invalid: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	h := newHarness(t, "mem", harnessOptions{})
	resp := h.must(200, req{method: "GET", path: "/openapi.json"})
	var got, want any
	if err := json.Unmarshal(resp.body, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(OpenAPI(), &want)
	if b1, _ := json.Marshal(got); string(b1) != func() string { b2, _ := json.Marshal(want); return string(b2) }() {
		t.Error("/openapi.json differs from the embedded document")
	}
}
