package plaintext_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/plaintext"
)

func TestLine(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"plain", "Refund 40 EUR to c_9", "Refund 40 EUR to c_9"},
		{"letters, symbols, emoji", "Überweisung 40 € 日本 🙂 Ωμέγα עברית", "Überweisung 40 € 日本 🙂 Ωμέγα עברית"},
		{"backslashes stay", `C:\tmp \u{202E} \x1b`, `C:\tmp \u{202E} \x1b`},
		{"replacement character stays", "a\uFFFDb", "a\uFFFDb"},
		{"variation selector stays", "\u2764\uFE0F", "\u2764\uFE0F"},
		{"RLO", "invoice_\u202Efdp.exe", `invoice_\u{202E}fdp.exe`},
		{"LRO PDF", "\u202Dx\u202C", `\u{202D}x\u{202C}`},
		{"isolates", "\u2066a\u2067b\u2068c\u2069", `\u{2066}a\u{2067}b\u{2068}c\u{2069}`},
		{"marks", "\u200E\u200F\u061C", `\u{200E}\u{200F}\u{061C}`},
		{"zero width", "pay\u200Bpal\u200C\u200D\u2060\uFEFF", `pay\u{200B}pal\u{200C}\u{200D}\u{2060}\u{FEFF}`},
		{"soft hyphen", "ad\u00ADmin", `ad\u{00AD}min`},
		{"tag characters", "ok\U000E0001\U000E0041\U000E007F", `ok\u{E0001}\u{E0041}\u{E007F}`},
		{"ANSI escape", "a\x1b[2J\x1b]0;owned\x07b", `a\u{001B}[2J\u{001B}]0;owned\u{0007}b`},
		{"NUL and DEL", "\x00\x7f", `\u{0000}\u{007F}`},
		{"newline, CR, tab", "a\r\nb\tc\n", `a\u{000D}\u{000A}b\u{0009}c\u{000A}`},
		{"C1 controls", "\u0080\u0085\u009b\u009f", `\u{0080}\u{0085}\u{009B}\u{009F}`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u{2028}b\u{2029}c`},
		{"private use", "\uE000\uF8FF\U000F0000\U0010FFFD", `\u{E000}\u{F8FF}\u{F0000}\u{10FFFD}`},
		{"noncharacters", "\uFFFE\uFFFF\U0010FFFF\uFDD0", `\u{FFFE}\u{FFFF}\u{10FFFF}\u{FDD0}`},
		{"unassigned", "\u0378\U0003FFFD", `\u{0378}\u{3FFFD}`},
		{"invalid UTF-8", "bad\xff\xfeutf8\xc3", `bad\x{FF}\x{FE}utf8\x{C3}`},
		{"encoded surrogate", "\xed\xa0\x80", `\x{ED}\x{A0}\x{80}`},
		{"overlong", "\xc0\xaf", `\x{C0}\x{AF}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := plaintext.Line(c.in); got != c.want {
				t.Errorf("Line(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestMultiline(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"one\ntwo\n", "one\ntwo\n"},
		{"dos\r\nline", "dos\\u{000D}\nline"},
		{"over\rwrite", `over\u{000D}write`},
		{"tab\there", `tab\u{0009}here`},
		{"\n\u202E\n", "\n\\u{202E}\n"},
		{"a\u2028b\u2029c\u0085d", `a\u{2028}b\u{2029}c\u{0085}d`},
		{"\x1b[31mred\x1b[0m\n", "\\u{001B}[31mred\\u{001B}[0m\n"},
		{"\xff\n", "\\x{FF}\n"},
	}
	for _, c := range cases {
		if got := plaintext.Multiline(c.in); got != c.want {
			t.Errorf("Multiline(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestEscapedMatchesTheCategories checks Escaped over every code point
// against the categories as Go's tables list them: escaped exactly when
// the rune is in Cc, Cf, Co, Zl or Zp, or in no category at all (Cn).
func TestEscapedMatchesTheCategories(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // surrogates are not runes of a string
		}
		if got, want := plaintext.Escaped(r), reference(r); got != want {
			t.Fatalf("Escaped(%U) = %v, want %v (category %s)", r, got, want, category(r))
		}
	}
	for _, r := range []rune{-1, 0xD800, 0xDFFF, unicode.MaxRune + 1} {
		if !plaintext.Escaped(r) {
			t.Errorf("Escaped(%d) = false for a rune that is no code point", r)
		}
	}
}

// reference is the rule as the brief states it, from unicode.Categories.
func reference(r rune) bool {
	c := category(r)
	return c == "Cn" || c == "Cc" || c == "Cf" || c == "Co" || c == "Zl" || c == "Zp"
}

// category is r's two-letter general category, "Cn" when no table of
// unicode.Categories holds it.
func category(r rune) string {
	for name, table := range unicode.Categories {
		if len(name) == 2 && unicode.Is(table, r) {
			return name
		}
	}
	return "Cn"
}

// referenceRender is Line (lines false) or Multiline (lines true) written
// the slow, obvious way: one rune at a time, by the reference rule.
func referenceRender(s string, lines bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x{%02X}`, s[i])
		case r == '\n' && lines:
			b.WriteByte('\n')
		case reference(r):
			fmt.Fprintf(&b, `\u{%04X}`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// TestUnchangedTextIsNotCopied: text with nothing to escape comes back as
// the same string, so rendering ordinary pages costs no allocation.
func TestUnchangedTextIsNotCopied(t *testing.T) {
	s := strings.Repeat("Refund 40 € to c_9 🙂\n", 20)
	if n := testing.AllocsPerRun(100, func() { _ = plaintext.Multiline(s) }); n != 0 {
		t.Errorf("Multiline of clean text allocates %v times", n)
	}
}

// FuzzPlaintext: whatever the text, the output is valid UTF-8, holds no
// rune of the escaped categories (Multiline: but "\n"), is what the slow
// reference rendering gives (so nothing is dropped or shortened), and is
// already plain text (rendering it again changes nothing).
func FuzzPlaintext(f *testing.F) {
	for _, s := range []string{"", "plain", "a\u202Eb\u200Bc", "\x1b[2J\r\n\t", "\xff\xfe\xed\xa0\x80",
		"\U000E0041\uE000\uFFFF\u0378", "\u2028\u2029\n", `\u{202E}\x{FF}`, "\U0001F642\u200D\U0001F642"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, lines := range []bool{false, true} {
			render := plaintext.Line
			if lines {
				render = plaintext.Multiline
			}
			out := render(s)
			if !utf8.ValidString(out) {
				t.Fatalf("lines %v: %q -> invalid UTF-8 %q", lines, s, out)
			}
			if i := strings.IndexFunc(out, func(r rune) bool { return plaintext.Escaped(r) && !(lines && r == '\n') }); i >= 0 {
				t.Fatalf("lines %v: %q -> %q keeps a hidden rune at %d", lines, s, out, i)
			}
			if want := referenceRender(s, lines); out != want {
				t.Fatalf("lines %v: %q -> %q, want %q", lines, s, out, want)
			}
			if again := render(out); again != out {
				t.Fatalf("lines %v: rendering %q again gave %q", lines, out, again)
			}
		}
	})
}
