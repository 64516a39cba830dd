// Package plaintext renders text that an agent (or anyone but the reader)
// chose as plain text a person can read safely: the one rule every surface
// that shows such text applies (the inbox, the MCP gateway's elicitation,
// AG-UI interrupts, the CLI).
//
// A character a person cannot see, or that changes how the text around it
// reads, is written as a visible escape instead: bidirectional overrides
// and isolates can make "Refund 40 to c_9" read as something else,
// zero-width and tag characters can hide words, C0 and C1 controls (ANSI
// escapes among them) drive terminals and forge lines. Precisely, every
// code point of the general categories
//
//	Cc  controls (C0, DEL, C1): NUL, ESC, CR, TAB, NEL, CSI, …
//	Cf  format characters: bidi controls U+202A–U+202E and U+2066–U+2069,
//	    ZWSP U+200B, ZWNJ/ZWJ, the BOM U+FEFF, the soft hyphen, tags
//	    U+E0000–U+E007F, …
//	Co  private use: U+E000–U+F8FF and planes 15 and 16
//	Cn  unassigned in Go's Unicode tables (unicode.Version), noncharacters
//	    such as U+FFFE included
//	Zl  the line separator U+2028
//	Zp  the paragraph separator U+2029
//
// is written as \u{XXXX}: upper-case hex, at least four digits (\u{202E},
// \u{0000}, \u{E0041}). Line escapes them all; Multiline keeps "\n" as a
// line break, and only "\n": a carriage return, also in "\r\n", is escaped,
// so that no text can return to the start of a line and write over it.
//
// A byte that is not part of valid UTF-8 is written as \x{XX} (upper-case
// hex, two digits): it names the byte exactly, and stays apart from a real
// U+FFFD in the text. Surrogate code points cannot occur in a Go string as
// characters; their UTF-8 encodings are invalid bytes and are escaped so.
//
// Everything else is left as it is, a backslash included, so that an
// escape the text itself spells out is only characters (the escapes are
// for reading, not for decoding back). Nothing is dropped or shortened:
// the output holds every character of the input, visible.
package plaintext
