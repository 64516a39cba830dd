package sqlitestore

import (
	"database/sql"
	"encoding/json"
	"reflect"
	"testing"
)

// TestFromJSONStrings checks the fast path against encoding/json: the same
// slices (nil and empty kept apart), and encoding/json's answer whenever the
// text is not a plain array.
func TestFromJSONStrings(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`[]`, `["requester"]`, `["role:finance","actor:bob"]`, `[""]`, `["",""]`,
		`["a\"b"]`, `["a\\b"]`, `["\u003c"]`, `["é"]`, "[\"a\tb\"]", `[ "a"]`, `["a" ]`, `["a",]`, `[,"a"]`,
		`["a",,"b"]`, `["a""b"]`, `["a"`, `"a"]`, `[1]`, `[null]`, `["a",1]`, `x`, ``, `[`, `["]`, `["a\"]`,
	} {
		got, gotErr := fromJSONStrings[string](sql.NullString{String: in, Valid: true})
		var want []string
		wantErr := json.Unmarshal([]byte(in), &want)
		if wantErr == nil && want == nil {
			want = []string{} // fromJSONList's empty, for "null"
		}
		if (gotErr != nil) != (wantErr != nil) || (wantErr == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("%q: got %#v, %v; encoding/json %#v, %v", in, got, gotErr, want, wantErr)
		}
		if wantErr == nil && (got == nil) != (want == nil) {
			t.Errorf("%q: nil %v, want %v", in, got == nil, want == nil)
		}
	}
	if got, err := fromJSONStrings[string](sql.NullString{}); got != nil || err != nil {
		t.Errorf("NULL: %#v, %v", got, err)
	}
}

func BenchmarkFromJSONStrings(b *testing.B) {
	s := sql.NullString{String: `["role:finance","actor:bob"]`, Valid: true}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			_, _ = fromJSONStrings[string](s)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = fromJSONList[string](s)
		}
	})
}
