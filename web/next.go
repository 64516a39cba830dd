package web

import (
	"net/url"
	"strings"
)

// maxNextBytes bounds where sign-in sends the browser next; the inbox's own
// links are far shorter.
const maxNextBytes = 2048

// safeNext returns next when it is a path of this site, else "/". It is
// where the browser goes after signing in, so it must not be an open
// redirect: browsers drop tabs and newlines from a URL and read a backslash
// as a slash, so "/\t/evil.example" and "/\evil.example" are another site to
// them, and a path that decodes to one of those is refused as well. Only a
// path that stays a path of this site under every such reading survives.
func safeNext(next string) string {
	if len(next) > maxNextBytes || !isSitePath(next) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Opaque != "" || u.User != nil || u.Host != "" {
		return "/"
	}
	// Decode as often as the value could be decoded on its way (a proxy, a
	// second redirect), and check each reading.
	p := u.EscapedPath()
	for range 3 {
		dec, err := url.PathUnescape(p)
		if err != nil || !isSitePath(dec) {
			return "/"
		}
		if dec == p {
			break
		}
		p = dec
	}
	if strings.Contains(p, "%") {
		return "/" // still encoded after three decodings: nobody links like that
	}
	return next
}

// isSitePath reports whether s is an absolute path of this site as a
// browser reads it: it starts with one slash, contains no control
// characters, spaces or backslashes, and its second character is not one a
// browser would make a second slash of.
func isSitePath(s string) bool {
	if len(s) == 0 || s[0] != '/' {
		return false
	}
	if len(s) > 1 && (s[1] == '/' || s[1] == '\\') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f || c == '\\' {
			return false
		}
	}
	return true
}
