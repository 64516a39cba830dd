package canonjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/countersign/countersign/internal/canonjson"
)

// fuzzSeeds doubles as the corpus of TestMatchesEncodingJSON.
var fuzzSeeds = []string{
	``,
	`null`,
	`true`,
	`-0`,
	`1e21`,
	`1E-7`,
	`123456789012345678901234567890`,
	`0.1`,
	`1e400`,
	`1e-400`,
	`"\ud83d\ude00"`,
	`"\ud800"`,
	"\"\xff\"",
	`"\u0000\u001f\u007f\"\\\/\b\f\n\r\t"`,
	`{"b":1,"a":2}`,
	`{"a":1,"a":2}`,
	`{"a":1,"\u0061":2}`,
	`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
	`[1,[2,[3,{"x":[]}]]]`,
	`{"tool":"fs.write","args":{"path":"/etc/hosts","content":"127.0.0.1 localhost\n","mode":420,"append":false}}`,
	`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
	` { "a" : [ ] , "b" : { } } `,
	`[1,]`,
	`{"a":1}x`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
}

// FuzzCanonicalize checks that Canonicalize never panics, that what it
// accepts is valid JSON with the same value as encoding/json reads, that its
// output is a fixed point, and that it rejects exactly what it should.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		out, err := canonjson.Canonicalize(in)
		if !bytes.Equal(in, orig) {
			t.Fatalf("Canonicalize modified its input")
		}
		valid := json.Valid(in)
		if err != nil {
			var cerr *canonjson.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error %v is %T, want *canonjson.Error", err, err)
			}
			// encoding/json does not check duplicates, UTF-8, surrogates
			// or range, but anything it deems well-formed has no syntax
			// error.
			if valid && errors.Is(err, canonjson.ErrSyntax) {
				t.Fatalf("syntax error on input encoding/json accepts: %v", err)
			}
			if out != nil {
				t.Fatalf("output %q returned with error %v", out, err)
			}
			return
		}
		if !valid {
			t.Fatalf("accepted input encoding/json rejects: %q", in)
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		again, err := canonjson.Canonicalize(out)
		if err != nil {
			t.Fatalf("output %q rejected on second pass: %v", out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n once  %q\n twice %q", out, again)
		}
		assertSameValue(t, in, out)

		d, err := canonjson.Digest(in)
		if err != nil {
			t.Fatalf("Digest rejects what Canonicalize accepts: %v", err)
		}
		if d2, _ := canonjson.Digest(out); d2 != d {
			t.Fatalf("digest of canonical form %s differs from digest of input %s", d2, d)
		}
	})
}
