package canonjson_test

import (
	"testing"

	"github.com/countersign/countersign/internal/canonjson"
)

// toolInput is a typical tool call body (~300 bytes): unsorted keys, some
// whitespace, nested arguments, escapes and a fractional number.
var toolInput = []byte(`{
  "tool": "filesystem.write_file",
  "arguments": {
    "path": "/srv/app/config/settings.yaml",
    "content": "server:\n  port: 8080\n  host: \"0.0.0.0\"\n",
    "mode": 420,
    "create_dirs": true,
    "backup": false
  },
  "session": "7f9c2ba4-e88f-4d8a-9b3e-1a2b3c4d5e6f",
  "timeout_s": 30.5,
  "tags": ["deploy", "config"]
}`)

func BenchmarkDigest(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(toolInput)))
	for b.Loop() {
		if _, err := canonjson.Digest(toolInput); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(toolInput)))
	for b.Loop() {
		if _, err := canonjson.Canonicalize(toolInput); err != nil {
			b.Fatal(err)
		}
	}
}
