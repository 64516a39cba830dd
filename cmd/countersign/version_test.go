package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadVersion(t *testing.T) {
	vcs := func(rev, at, modified string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/countersign/countersign", Version: "(devel)"}}
		for k, v := range map[string]string{"vcs.revision": rev, "vcs.time": at, "vcs.modified": modified} {
			if v != "" {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: k, Value: v})
			}
		}
		return bi
	}
	tests := []struct {
		name             string
		bi               *debug.BuildInfo
		ok               bool
		stamp, stampDate string
		want, wantAbsent []string
	}{
		{"a release", vcs("0123456789abcdef0123", "2026-12-04T10:00:00Z", "false"), true, "v0.3.0", "2026-12-05T04:00:00Z",
			[]string{"countersign v0.3.0\n", "commit:     0123456789ab\n", "built:      2026-12-05T04:00:00Z\n", "go:         go1.26.8 "},
			[]string{"committed", "dirty"}},
		{"go build in a modified checkout", vcs("0123456789abcdef0123", "2026-12-04T10:00:00Z", "true"), true, "", "",
			[]string{"countersign (devel)\n", "commit:     0123456789ab-dirty\n", "committed:  2026-12-04T10:00:00Z\n"}, []string{"built"}},
		{"go install module@version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}}, true, "", "",
			[]string{"countersign v0.3.0\n"}, []string{"commit", "built", "committed"}},
		{"no build info", nil, false, "", "", []string{"countersign (devel)\n", "go:         "}, []string{"commit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			readVersion(tt.bi, tt.ok, tt.stamp, tt.stampDate).write(&b)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("printed:\n%s\nwant %q", b.String(), w)
				}
			}
			for _, w := range tt.wantAbsent {
				if strings.Contains(b.String(), w) {
					t.Errorf("printed:\n%s\nwant no %q", b.String(), w)
				}
			}
			if !strings.HasPrefix(b.String(), "countersign ") {
				t.Errorf("printed %q: the first line must begin with countersign", b.String())
			}
		})
	}
}
