package canonjson

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestCompareUTF16(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int // sign only
	}{
		{"", "", 0},
		{"", "a", -1},
		{"a", "ab", -1},
		{"b", "ab", 1},
		{"A", "a", -1},
		{"\u00f6", "\u20ac", -1},
		{"\U0001F600", "\uFB33", -1},     // surrogates sort below U+E000…
		{"\U0001F600", "\uD7FF", 1},      // …but above U+D7FF
		{"\U00010000", "\uE000", -1},     // edge of both ranges
		{"\U0010FFFF", "\uFFFF", -1},     // highest of each
		{"\U0001F600", "\U0001F601", -1}, // same high surrogate
		{"\U0001F600", "\U00020000", -1}, // different high surrogate
		{"x\U0001F600", "x\uFB33", -1},   // difference after a shared prefix
		{"\u20ac\U0001F600", "\u20ac\uFB33", -1},
		{"\u0100", "\u00ff", 1}, // differing continuation byte
	}
	for _, tt := range tests {
		got := compareUTF16([]byte(tt.a), []byte(tt.b))
		if sign(got) != tt.want {
			t.Errorf("compareUTF16(%+q, %+q) = %d, want sign %d", tt.a, tt.b, got, tt.want)
		}
		if back := compareUTF16([]byte(tt.b), []byte(tt.a)); sign(back) != -tt.want {
			t.Errorf("compareUTF16(%+q, %+q) = %d, want sign %d", tt.b, tt.a, back, -tt.want)
		}
	}
}

// TestCompareUTF16Random checks the byte-level shortcut against a direct
// comparison of UTF-16 code unit slices.
func TestCompareUTF16Random(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	// Runes from the ranges where the orders disagree, plus shared ASCII so
	// that strings often have common prefixes.
	pool := []rune{'a', 'b', 0x7f, 0x80, 0x7ff, 0x800, 0xD7FF, 0xE000, 0xFB33, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF}
	randString := func() string {
		r := make([]rune, rng.IntN(4))
		for i := range r {
			r[i] = pool[rng.IntN(len(pool))]
		}
		return string(r)
	}
	for range 100_000 {
		a, b := randString(), randString()
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := compareUTF16([]byte(a), []byte(b)); sign(got) != want {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want sign %d", a, b, got, want)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestAppendRune(t *testing.T) {
	t.Parallel()
	// Every code point below U+0080 and a sample above, against the table in
	// RFC 8785 §3.2.2.2.
	for r := rune(0); r < 0x80; r++ {
		got := string(appendRune(nil, r))
		var want string
		switch r {
		case '"':
			want = `\"`
		case '\\':
			want = `\\`
		case '\b':
			want = `\b`
		case '\f':
			want = `\f`
		case '\n':
			want = `\n`
		case '\r':
			want = `\r`
		case '\t':
			want = `\t`
		default:
			if r < 0x20 {
				want = `\u00` + string("0123456789abcdef"[r>>4]) + string("0123456789abcdef"[r&15])
			} else {
				want = string(r)
			}
		}
		if got != want {
			t.Errorf("appendRune(%U) = %q, want %q", r, got, want)
		}
	}
	for _, r := range []rune{0x80, 0x2028, 0xFEFF, 0xFFFD, 0x1F600, utf8.MaxRune} {
		if got := string(appendRune(nil, r)); got != string(r) {
			t.Errorf("appendRune(%U) = %q, want literal", r, got)
		}
	}
}
