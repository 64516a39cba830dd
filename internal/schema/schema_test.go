package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const refundSchema = `{"type":"object","required":["amount","customer"],"additionalProperties":false,
	"properties":{"amount":{"type":"number","exclusiveMinimum":0},"customer":{"type":"string","minLength":1},
	"lines":{"type":"array","items":{"type":"object","required":["sku"],"properties":{"sku":{"type":"string"}}}}}}`

func TestValidateListsEveryFailingPath(t *testing.T) {
	t.Parallel()
	v, err := Compile(json.RawMessage(refundSchema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		input string
		paths []string // every path that must be reported; nil = valid
	}{
		{"valid", `{"amount":40,"customer":"c_9"}`, nil},
		{"valid with lines", `{"amount":1,"customer":"c","lines":[{"sku":"a"}]}`, nil},
		{"wrong type and too small", `{"amount":"x","customer":""}`, []string{"/amount", "/customer"}},
		{"missing and unknown", `{"amount":0,"extra":true}`, []string{"", "/amount"}},
		{"nested", `{"amount":1,"customer":"c","lines":[{"sku":1},{}]}`, []string{"/lines/0/sku", "/lines/1"}},
		{"not an object", `[1,2]`, []string{""}},
		{"invalid JSON", `{"amount":`, []string{""}},
		{"trailing data", `{"amount":1,"customer":"c"} {}`, []string{""}},
		{"empty", ``, []string{""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := v.Validate(json.RawMessage(tc.input))
			if tc.paths == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("Validate = %v, want *Error", err)
			}
			got := map[string]bool{}
			for _, p := range se.Problems {
				got[p.Path] = true
				if p.Message == "" {
					t.Errorf("problem at %q has no message", p.Path)
				}
			}
			for _, p := range tc.paths {
				if !got[p] {
					t.Errorf("path %q not reported in %v", p, se.Problems)
				}
			}
		})
	}
}

func TestCompileRefusesBadSchemasAndExternalRefs(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{`, `{"type":"nonsense"}`, `{"$ref":"https://example.com/x.json"}`, `{"$ref":"file:///etc/passwd"}`, `{"minimum":"ten"}`} {
		if _, err := Compile(json.RawMessage(s)); err == nil {
			t.Errorf("Compile(%s) succeeded", s)
		}
	}
	big := `{"type":"object","description":"` + strings.Repeat("x", MaxInputBytes) + `"}`
	if _, err := Compile(json.RawMessage(big)); err == nil {
		t.Error("Compile accepted a schema over the size limit")
	}
}

func TestPointerEscapes(t *testing.T) {
	t.Parallel()
	if got := pointer([]string{"a/b", "c~d", "0"}); got != "/a~1b/c~0d/0" {
		t.Fatalf("pointer = %q", got)
	}
}

// FuzzValidate feeds hostile inputs to the validator: it never panics, and it
// either accepts valid JSON or reports at least one problem.
func FuzzValidate(f *testing.F) {
	v, err := Compile(json.RawMessage(refundSchema))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{"amount":40,"customer":"c_9"}`, `{}`, `[]`, `null`, `{"amount":1e400}`, `{"a":` + strings.Repeat("[", 100), "\xff", `{"lines":[{"sku":null}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		err := v.Validate(in)
		if err == nil {
			if !json.Valid(in) {
				t.Fatalf("accepted invalid JSON %q", in)
			}
			return
		}
		var se *Error
		if !errors.As(err, &se) || len(se.Problems) == 0 {
			t.Fatalf("Validate(%q) = %v, want *Error with problems", in, err)
		}
	})
}
