package plaintext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// hidden holds the assigned categories that are escaped; Cn, the
// unassigned code points, is every rune outside assigned.
var hidden = []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Co, unicode.Zl, unicode.Zp}

// visible is every other assigned category: the major classes L, M, N, P,
// S and Z. Go's unicode package has no Cn table, and its C table holds the
// unassigned code points too, so Cn is the runes in neither list.
var visible = []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z}

// Escaped reports whether r is shown escaped: a code point of category Cc,
// Cf, Co, Cn, Zl or Zp, or not a valid code point at all (utf8.RuneError
// itself, U+FFFD, is a visible symbol and is not escaped).
func Escaped(r rune) bool {
	if r >= 0x20 && r < 0x7f {
		return false // printable ASCII, the common case
	}
	if r < 0x20 || r == 0x7f {
		return true
	}
	if !utf8.ValidRune(r) {
		return true
	}
	return unicode.In(r, hidden...) || !unicode.In(r, visible...)
}

// Line returns s as one line of plain text: every rune Escaped reports,
// "\n" included, as \u{XXXX}, and every byte that is not UTF-8 as \x{XX}.
func Line(s string) string { return render(s, false) }

// Multiline returns s as plain text of several lines: as Line, but "\n"
// stays a line break. "\r" is escaped, also before "\n".
func Multiline(s string) string { return render(s, true) }

func render(s string, lines bool) string {
	// clean reports whether r is written as it is.
	clean := func(r rune) bool { return lines && r == '\n' || !Escaped(r) }
	// Most text has nothing to escape: return it without a copy.
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !clean(r) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x{`)
			writeHex(&b, uint32(s[i]), 2)
			b.WriteByte('}')
		case !clean(r):
			b.WriteString(`\u{`)
			writeHex(&b, uint32(r), 4)
			b.WriteByte('}')
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// writeHex writes v in upper-case hex, zero-padded to at least width
// digits.
func writeHex(b *strings.Builder, v uint32, width int) {
	h := strings.ToUpper(strconv.FormatUint(uint64(v), 16))
	for n := len(h); n < width; n++ {
		b.WriteByte('0')
	}
	b.WriteString(h)
}
