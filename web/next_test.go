package web

import (
	"strings"
	"testing"
)

// TestSafeNext feeds safeNext what an attacker would put in a sign-in
// link's next: only paths of this site survive, also when the value is read
// as a browser reads it (tabs and newlines dropped, a backslash a slash)
// and when it is decoded once more on its way.
func TestSafeNext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		next, want string
	}{
		// Paths of the inbox survive as they are.
		{"/", "/"},
		{"/proposals/prp_01H", "/proposals/prp_01H"},
		{"/?status=all&action=payments.refund&after=eyJ2IjoxfQ", "/?status=all&action=payments.refund&after=eyJ2IjoxfQ"},
		{"/?thread=t%2F1", "/?thread=t%2F1"}, // an encoded slash in a query value is data
		{"/proposals/prp_1?result=applied#status", "/proposals/prp_1?result=applied#status"},
		// Another site, written plainly.
		{"//evil.example", "/"},
		{"//evil.example/path", "/"},
		{"https://evil.example", "/"},
		{"http:evil.example", "/"},
		{"HTTPS://evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"JaVaScRiPt:alert(1)", "/"},
		{"data:text/html,<script>alert(1)</script>", "/"},
		{"evil.example", "/"},
		{"", "/"},
		// What browsers read as another site: tab and newlines dropped, a
		// backslash taken for a slash.
		{"/\t/evil.example", "/"},
		{"/\n/evil.example", "/"},
		{"/\r/evil.example", "/"},
		{"/\\evil.example", "/"},
		{"\\\\evil.example", "/"},
		{"/\\/evil.example", "/"},
		{" //evil.example", "/"},
		{"/ /evil.example", "/"},
		{"/\x00/evil.example", "/"},
		{"/\x7f/evil.example", "/"},
		// The same, percent-encoded (the finding: /%09/evil.example).
		{"/%09/evil.example", "/"},
		{"/%0a/evil.example", "/"},
		{"/%0D%0A/evil.example", "/"},
		{"/%0d%0aSet-Cookie:%20a=b", "/"},
		{"/%5Cevil.example", "/"},
		{"/%5C%5Cevil.example", "/"},
		{"/%2F%2Fevil", "/"},
		{"/%2fevil.example", "/"},
		{"/%20/evil.example", "/"},
		{"/%00", "/"},
		// Encoded twice and thrice, for a hop that decodes once more.
		{"/%2509/evil.example", "/"},
		{"/%252F%252Fevil", "/"},
		{"/%25252F%25252Fevil", "/"},
		{"/%2525252Fx", "/"}, // still encoded after three decodings
		// Not a URL at all.
		{"/%zz", "/"},
		{"/%", "/"},
		// Credentials and hosts smuggled in.
		{"//user@evil.example", "/"},
		{"/@evil.example", "/@evil.example"}, // a path: "@" has no meaning there
		// Overlong.
		{"/" + strings.Repeat("a", maxNextBytes), "/"},
	} {
		if got := safeNext(tc.next); got != tc.want {
			t.Errorf("safeNext(%q) = %q, want %q", tc.next, got, tc.want)
		}
	}
}

// FuzzSafeNext checks that whatever safeNext lets through is a path of this
// site under every reading TestSafeNext names.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/", "/%09/evil", "//evil", "/\\evil", "/a?b=c", "/%2F%2Fevil"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		if got != "/" && got != next {
			t.Fatalf("safeNext(%q) = %q: it rewrites instead of refusing", next, got)
		}
		if !isSitePath(got) {
			t.Fatalf("safeNext(%q) = %q: not a path of this site", next, got)
		}
		if strings.ContainsAny(got, "\t\r\n\\ ") {
			t.Fatalf("safeNext(%q) = %q", next, got)
		}
	})
}
