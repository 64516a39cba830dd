package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Everything the client prints from a server is text an agent or another
// actor chose (previews, thread ids, reasons, error messages). A terminal
// obeys control characters in it: an escape sequence can rewrite the screen
// or a title bar, a carriage return or newline can forge a table row, and
// bidirectional or zero-width format characters can make "Refund 40" read as
// something else. So the client prints such characters as visible escapes.

// unsafeRune reports whether r must not reach a terminal as it is: C0 and
// C1 controls, DEL, format characters (bidi controls, zero-width ones, the
// BOM, soft hyphen) and the line and paragraph separators.
func unsafeRune(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}

// escapeText returns s with every unsafe character, and every byte that is
// not UTF-8, written as a visible escape (\x1b, \u202e). Other text,
// backslashes included, is left as it is: an escape it spells out is only
// characters, and a path such as C:\tmp stays readable.
func escapeText(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x100 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0xffff && unsafeRune(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return true
		}
		i += size
	}
	return false
}

// escapeJSON rewrites the unsafe characters that encoding/json leaves as
// they are (DEL, C1 controls, format characters) as \u escapes. In encoded
// JSON they can only occur inside strings, where a \u escape (four hex
// digits) means the same character, so the document decodes to the same
// value. encoding/json has already escaped C0 controls and U+2028/U+2029,
// and replaced invalid UTF-8.
func escapeJSON(doc []byte) []byte {
	s := string(doc)
	if !strings.ContainsFunc(s, jsonUnsafe) {
		return doc
	}
	var b strings.Builder
	for _, r := range s {
		if !jsonUnsafe(r) {
			b.WriteRune(r)
			continue
		}
		if r > 0xffff { // beyond the BMP: JSON spells it as a surrogate pair
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return []byte(b.String())
}

// jsonUnsafe is unsafeRune but for the whitespace that encoded JSON holds
// between tokens (inside strings encoding/json escapes it).
func jsonUnsafe(r rune) bool {
	return r != '\n' && r != '\r' && r != '\t' && unsafeRune(r)
}
