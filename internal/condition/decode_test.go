package condition

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeJSON checks DecodeJSON against encoding/json: the same value
// for every text encoding/json accepts, and an error for every text it
// refuses.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"amount":1000.5,"customer":"c_9"}`, `[1,-0.5e3,true,false,null,"a\"b\u00e9"]`, `{}`, `[]`,
		`{"a":{"b":[{"c":"caf\u00e9 é"}]}}`, `01`, `1.`, `-`, `"\ud800"`, `{"a":1,}`, ` 7 `, `1e400`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want any
		wantErr := json.Unmarshal(b, &want)
		got, err := DecodeJSON(b)
		switch {
		case wantErr != nil && err == nil:
			t.Fatalf("DecodeJSON(%q) = %#v, but encoding/json refuses it: %v", b, got, wantErr)
		case wantErr == nil && err != nil:
			t.Fatalf("DecodeJSON(%q): %v, but encoding/json decodes %#v", b, err, want)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("DecodeJSON(%q) = %#v, encoding/json %#v", b, got, want)
		}
	})
}
