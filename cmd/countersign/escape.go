package main

import (
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/countersign/countersign/internal/plaintext"
)

// Everything the client prints from a server is text an agent or another
// actor chose (previews, thread ids, reasons, error messages). A terminal
// obeys control characters in it: an escape sequence can rewrite the screen
// or a title bar, a carriage return or newline can forge a table row, and
// bidirectional or zero-width format characters can make "Refund 40" read as
// something else. So the client prints such text through plaintext.Line,
// the rule every surface shares (\u{202E}, \u{001B}, \x{FF}), and its JSON
// through escapeJSON.

// escapeJSON rewrites the characters plaintext escapes that encoding/json
// leaves as they are (DEL, C1 controls, format, private-use and unassigned
// characters) as JSON \u escapes. In encoded JSON they can only occur
// inside strings, where a \u escape (four hex digits) means the same
// character, so the document decodes to the same value: --json output stays
// exact for programs, and still cannot drive a terminal. encoding/json has
// already escaped C0 controls and U+2028/U+2029, and replaced invalid UTF-8.
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

// jsonUnsafe is plaintext.Escaped but for the whitespace that encoded JSON
// holds between tokens (inside strings encoding/json escapes it).
func jsonUnsafe(r rune) bool {
	return r != '\n' && r != '\r' && r != '\t' && plaintext.Escaped(r)
}
