package redact

import (
	"fmt"
	"strings"
)

// Mask replaces what URLs redacts.
const Mask = "REDACTED"

// URLs returns s with every URL in it redacted: after each "://", the
// userinfo (everything before the authority's last @), every query value
// (a query part without = entirely) and the fragment become Mask. A URL ends
// at ASCII whitespace or a control character, at an unescaped double quote,
// at <, > or a backquote, or at the end of s; a backslash escapes the byte
// after it, as in %q and JSON, so a quoted URL's escapes stay inside it.
// Text without "://" is returned unchanged.
func URLs(s string) string {
	i, n := nextURL(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i >= 0 {
		start := i + n
		end := urlEnd(s, start)
		b.WriteString(s[:start])
		redactAfterScheme(&b, s[start:end])
		s = s[end:]
		i, n = nextURL(s)
	}
	b.WriteString(s)
	return b.String()
}

// nextURL returns the index of the first "://" in s and its length, or -1.
// JSON writers that escape / write it `:\/\/`, which counts too.
func nextURL(s string) (i, n int) {
	i, n = strings.Index(s, "://"), len("://")
	if j := strings.Index(s, `:\/\/`); j >= 0 && (i < 0 || j < i) {
		i, n = j, len(`:\/\/`)
	}
	return i, n
}

// URL returns raw, a single URL, redacted as URLs redacts the URLs of a
// text, but read whole: nothing in it ends it early. A raw without "://" is
// read as what follows one (userinfo@host/path?query#fragment).
func URL(raw string) string {
	var b strings.Builder
	b.Grow(len(raw))
	rest := raw
	if i := strings.Index(raw, "://"); i >= 0 {
		b.WriteString(raw[:i+len("://")])
		rest = raw[i+len("://"):]
	}
	redactAfterScheme(&b, rest)
	return b.String()
}

// urlEnd returns the index in s, from start, where the URL that begins
// there ends.
func urlEnd(s string, start int) int {
	for j := start; j < len(s); j++ {
		switch c := s[j]; {
		case c == '\\':
			j++ // the escaped byte belongs to the URL (\" \\ \u0026)
		case c <= ' ' || c == 0x7f, c == '"', c == '<', c == '>', c == '`':
			return j
		}
	}
	return len(s)
}

// redactAfterScheme writes rest (what follows a "://") with its userinfo,
// query values and fragment replaced by Mask. Like net/url, it takes the
// fragment from the first #, the query from the first ? before it, and the
// userinfo from the authority (up to the first /) before its last @.
func redactAfterScheme(b *strings.Builder, rest string) {
	rest, fragment, hasFragment := strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	authority, path := rest, ""
	if k := strings.IndexByte(rest, '/'); k >= 0 {
		authority, path = rest[:k], rest[k:]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		b.WriteString(Mask)
		authority = authority[at:]
	}
	b.WriteString(authority)
	b.WriteString(path)
	if hasQuery {
		b.WriteByte('?')
		redactQuery(b, query)
	}
	if hasFragment {
		b.WriteByte('#')
		if fragment != "" {
			b.WriteString(Mask)
		}
	}
}

// redactQuery writes a query with each key kept and each value masked. A
// part with no = may be a bare token (?s3cret), so it is masked whole.
// Parts are separated by & or ;, and by \u0026, the & of a URL inside JSON
// text as encoding/json writes it (log lines, answers): read as part of a
// key, it would keep a bare token before it in the clear.
func redactQuery(b *strings.Builder, query string) {
	for {
		part := query
		i, sep := querySeparator(query)
		if i >= 0 {
			part = query[:i]
		}
		if key, value, ok := strings.Cut(part, "="); ok {
			b.WriteString(key)
			b.WriteByte('=')
			if value != "" {
				b.WriteString(Mask)
			}
		} else if part != "" {
			b.WriteString(Mask)
		}
		if i < 0 {
			return
		}
		b.WriteString(query[i : i+sep])
		query = query[i+sep:]
	}
}

// jsonAmpersand is & as encoding/json escapes it.
const jsonAmpersand = `\u0026`

// querySeparator finds the first separator of query's parts: its index and
// length, or -1.
func querySeparator(query string) (int, int) {
	i := strings.IndexAny(query, "&;")
	if j := strings.Index(query, jsonAmpersand); j >= 0 && (i < 0 || j < i) {
		return j, len(jsonAmpersand)
	}
	if i < 0 {
		return -1, 0
	}
	return i, 1
}

// Error returns err with the URLs of its text redacted (see URLs); errors.Is
// and errors.As still see err and its chain. A nil err stays nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return &redacted{err: err}
}

type redacted struct{ err error }

func (e *redacted) Error() string { return URLs(e.err.Error()) }
func (e *redacted) Unwrap() error { return e.err }

// CheckURL reports an error when raw holds a character RFC 3986 does not
// allow in a URL (a space, a quote, a backslash, a control character, any
// non-ASCII byte) or a % not followed by two hex digits. Such a character
// would let a reader of a text that quotes the URL — URLs, but also a
// person or a log parser — end it early and take the rest of its query for
// ordinary text. The error names the character's position, not the URL,
// which may hold a secret.
func CheckURL(raw string) error {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '%':
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return fmt.Errorf("the %% at byte %d does not start an escape of two hex digits (%%20, %%2F)", i+1)
			}
		case !allowed(c):
			what := fmt.Sprintf("%q", rune(c))
			if c >= 0x80 {
				what = "a non-ASCII byte"
			}
			return fmt.Errorf("byte %d is %s, which a URL does not hold raw: escape it as %%%02X", i+1, what, c)
		}
	}
	return nil
}

// allowed reports whether c is one of RFC 3986's unreserved, reserved
// (gen-delims and sub-delims) characters.
func allowed(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
