package canonjson

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects Canonicalize accepts.
// The parser recurses once per level, so the bound keeps hostile input from
// costing unbounded stack; no real tool input comes close to it.
const MaxDepth = 1000

// Reasons an input is rejected. Every error returned by this package is an
// *Error that wraps exactly one of them.
var (
	// ErrSyntax means the input is not a single well-formed JSON text
	// (RFC 8259), including trailing data after the value.
	ErrSyntax = errors.New("invalid JSON")
	// ErrDuplicateKey means an object has two members with the same key
	// after escapes are decoded; I-JSON forbids it and JCS needs it
	// forbidden, since there is no agreed way to pick one.
	ErrDuplicateKey = errors.New("duplicate object key")
	// ErrNumberRange means a number's magnitude is too large for an IEEE 754
	// double, so it would read as ±Inf, which has no JSON form.
	ErrNumberRange = errors.New("number out of IEEE 754 double range")
	// ErrInvalidUnicode means a string holds invalid UTF-8 or a lone
	// surrogate escape, neither of which has a canonical UTF-8 form.
	ErrInvalidUnicode = errors.New("invalid Unicode in string")
	// ErrTooDeep means arrays and objects nest more than MaxDepth levels.
	ErrTooDeep = errors.New("nesting too deep")
)

// Error describes why and where an input was rejected.
type Error struct {
	// Offset is the byte offset in the input where the problem was found.
	Offset int
	// Err is one of the Err* sentinels of this package.
	Err error
	// Detail says what was found, for people reading logs.
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("canonjson: %v at offset %d: %s", e.Err, e.Offset, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// Canonicalize parses raw as one JSON text and returns its RFC 8785
// canonical form. The result is a new slice; raw is not modified.
func Canonicalize(raw []byte) ([]byte, error) {
	p := getParser(raw)
	defer putParser(p)
	// Canonical output is rarely longer than the input (whitespace and
	// escapes only shrink); the slack covers exponent signs like 1e21 → 1e+21.
	p.out = make([]byte, 0, len(raw)+16)
	if err := p.run(); err != nil {
		return nil, err
	}
	out := p.out
	p.out = nil // handed to the caller, so the pool must not reuse it
	return out, nil
}

// DigestPrefix names the hash in every digest string, so that a future
// change of algorithm cannot be mistaken for a mismatch.
const DigestPrefix = "sha256:"

// Digest returns "sha256:" followed by the lowercase hex SHA-256 of the
// canonical form of raw.
func Digest(raw []byte) (string, error) {
	p := getParser(raw)
	defer putParser(p)
	// The canonical bytes never leave this function, so the pooled buffer
	// can be reused and Digest allocates only its result.
	p.out = p.outBuf[:0]
	if err := p.run(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(p.out)
	p.outBuf = p.out
	var buf [len(DigestPrefix) + 2*sha256.Size]byte
	copy(buf[:], DigestPrefix)
	hex.Encode(buf[len(DigestPrefix):], sum[:])
	return string(buf[:]), nil
}

// member locates one object member while its object is being sorted: the
// decoded key in parser.keys and the canonical "key":value text in
// parser.out.
type member struct {
	keyStart, keyEnd int
	start, end       int
}

// parser holds the state of one Canonicalize call. The slices are reused
// across calls through parserPool, which is why nothing in them may escape.
type parser struct {
	in    []byte
	pos   int
	depth int
	out   []byte

	outBuf  []byte   // Digest's reusable output buffer
	keys    []byte   // decoded keys of the objects being parsed, a stack
	members []member // members of the objects being parsed, a stack
	scratch []byte   // copy of an object's members while they are reordered
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

func getParser(raw []byte) *parser {
	p := parserPool.Get().(*parser)
	p.in, p.pos, p.depth = raw, 0, 0
	return p
}

// maxPooledBuf keeps one huge input from pinning its buffers in the pool.
const maxPooledBuf = 64 << 10

func putParser(p *parser) {
	p.in, p.out = nil, nil
	if cap(p.outBuf) > maxPooledBuf {
		p.outBuf = nil
	}
	if cap(p.keys) > maxPooledBuf {
		p.keys = nil
	}
	if cap(p.scratch) > maxPooledBuf {
		p.scratch = nil
	}
	if cap(p.members) > maxPooledBuf/32 {
		p.members = nil
	}
	p.keys, p.members, p.scratch = p.keys[:0], p.members[:0], p.scratch[:0]
	parserPool.Put(p)
}

func (p *parser) fail(sentinel error, format string, args ...any) error {
	return &Error{Offset: p.pos, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// unexpected reports the byte at p.pos (or the end of input) as out of place.
func (p *parser) unexpected(context string) error {
	if p.pos >= len(p.in) {
		return p.fail(ErrSyntax, "unexpected end of input %s", context)
	}
	return p.fail(ErrSyntax, "unexpected %q %s", p.in[p.pos], context)
}

func (p *parser) run() error {
	p.skipSpace()
	if err := p.value(); err != nil {
		return err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return p.fail(ErrSyntax, "trailing data %q after the JSON value", p.in[p.pos])
	}
	return nil
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() error {
	if p.pos >= len(p.in) {
		return p.unexpected("where a value was expected")
	}
	switch c := p.in[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		return p.str(false)
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	default:
		if c == '-' || ('0' <= c && c <= '9') {
			return p.number()
		}
		return p.unexpected("where a value was expected")
	}
}

func (p *parser) literal(word string) error {
	if len(p.in)-p.pos < len(word) || string(p.in[p.pos:p.pos+len(word)]) != word {
		return p.fail(ErrSyntax, "invalid literal, expected %q", word)
	}
	p.pos += len(word)
	p.out = append(p.out, word...)
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.fail(ErrTooDeep, "more than %d nested arrays and objects", MaxDepth)
	}
	return nil
}

func (p *parser) array() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++ // '['
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		p.depth--
		return nil
	}
	for {
		if err := p.value(); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.unexpected("in array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
			p.skipSpace()
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			p.depth--
			return nil
		default:
			return p.unexpected("in array, expected ',' or ']'")
		}
	}
}

func (p *parser) object() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++ // '{'
	p.out = append(p.out, '{')
	// Members are written to out without separators, then reordered and
	// joined once the object is complete. Nested objects push onto the same
	// keys and members stacks and pop before the next member starts, so
	// these bases stay valid.
	region := len(p.out)
	keysBase, membersBase := len(p.keys), len(p.members)

	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		p.depth--
		return nil
	}
	for {
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return p.unexpected("in object, expected a string key")
		}
		m := member{start: len(p.out), keyStart: len(p.keys)}
		if err := p.str(true); err != nil {
			return err
		}
		m.keyEnd = len(p.keys)
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return p.unexpected("in object, expected ':'")
		}
		p.pos++
		p.out = append(p.out, ':')
		p.skipSpace()
		if err := p.value(); err != nil {
			return err
		}
		m.end = len(p.out)
		p.members = append(p.members, m)

		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.unexpected("in object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			p.skipSpace()
			continue
		}
		if p.in[p.pos] != '}' {
			return p.unexpected("in object, expected ',' or '}'")
		}
		p.pos++
		break
	}

	if err := p.finishObject(region, membersBase); err != nil {
		return err
	}
	p.keys = p.keys[:keysBase]
	p.members = p.members[:membersBase]
	p.out = append(p.out, '}')
	p.depth--
	return nil
}

// finishObject sorts the members written since region, rejects duplicate
// keys, and rewrites them in order with commas between.
func (p *parser) finishObject(region, membersBase int) error {
	ms := p.members[membersBase:]
	key := func(m member) []byte { return p.keys[m.keyStart:m.keyEnd] }
	cmp := func(a, b member) int { return compareUTF16(key(a), key(b)) }

	if !slices.IsSortedFunc(ms, cmp) {
		slices.SortFunc(ms, cmp)
	}
	// Sorted, so equal keys are neighbours.
	for i := 1; i < len(ms); i++ {
		if string(key(ms[i-1])) == string(key(ms[i])) {
			return p.fail(ErrDuplicateKey, "key %.64q appears more than once in the object ending here", key(ms[i]))
		}
	}
	if len(ms) == 1 {
		return nil
	}
	p.scratch = append(p.scratch[:0], p.out[region:]...)
	p.out = p.out[:region]
	for i, m := range ms {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(p.out, p.scratch[m.start-region:m.end-region]...)
	}
	return nil
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units,
// as RFC 8785 §3.2.3 requires. UTF-8 byte order equals code point order,
// which differs from UTF-16 order only when one string has U+E000–U+FFFF
// where the other has a supplementary character (encoded as surrogates
// D800–DFFF, which sort below E000). So compare bytes up to the first
// difference, and decide that rune pair by its UTF-16 weight.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	// Back up to the start of the rune that differs; the bytes before i are
	// shared, so it starts at the same index in both.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	return utf16Weight(ra) - utf16Weight(rb)
}

// utf16Weight maps a rune to a number that orders like its first UTF-16
// code unit, breaking ties between supplementary characters by code point
// (which matches comparing their surrogate pairs).
func utf16Weight(r rune) int {
	if r >= 0xE000 && r <= 0xFFFF {
		return int(r) + 0x110000 // above every supplementary character
	}
	return int(r)
}

// str parses the string at p.pos and writes its canonical form to out. For
// object keys it also appends the decoded bytes to keys, because members sort
// by the decoded key, not by its spelling.
func (p *parser) str(isKey bool) error {
	p.pos++ // opening quote
	p.out = append(p.out, '"')
	in := p.in
	for {
		// Copy runs of bytes that need no escaping in one go: the common case.
		start := p.pos
		for p.pos < len(in) {
			c := in[p.pos]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			p.pos++
		}
		if p.pos > start {
			p.out = append(p.out, in[start:p.pos]...)
			if isKey {
				p.keys = append(p.keys, in[start:p.pos]...)
			}
		}
		if p.pos >= len(in) {
			return p.fail(ErrSyntax, "unterminated string")
		}
		switch c := in[p.pos]; {
		case c == '"':
			p.pos++
			p.out = append(p.out, '"')
			return nil
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return err
			}
			p.out = appendRune(p.out, r)
			if isKey {
				p.keys = utf8.AppendRune(p.keys, r)
			}
		case c < 0x20:
			return p.fail(ErrSyntax, "unescaped control character %#02x in string", c)
		default:
			// utf8.DecodeRune reports overlong forms, surrogate code
			// points and truncated sequences as RuneError of width 1.
			r, size := utf8.DecodeRune(in[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return p.fail(ErrInvalidUnicode, "invalid UTF-8 byte %#02x in string", c)
			}
			p.out = append(p.out, in[p.pos:p.pos+size]...)
			if isKey {
				p.keys = append(p.keys, in[p.pos:p.pos+size]...)
			}
			p.pos += size
		}
	}
}

// escape decodes the escape sequence at p.pos, joining a \uD8xx\uDCxx
// surrogate pair into one rune.
func (p *parser) escape() (rune, error) {
	if p.pos+1 >= len(p.in) {
		p.pos++
		return 0, p.fail(ErrSyntax, "unterminated escape sequence")
	}
	c := p.in[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
	default:
		p.pos--
		return 0, p.fail(ErrSyntax, "invalid escape character %q", c)
	}
	r, err := p.hex4()
	if err != nil {
		return 0, err
	}
	switch {
	case r < 0xD800 || r > 0xDFFF:
		return r, nil
	case r >= 0xDC00:
		return 0, p.fail(ErrInvalidUnicode, "lone low surrogate \\u%04x", r)
	}
	if p.pos+1 >= len(p.in) || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
		return 0, p.fail(ErrInvalidUnicode, "high surrogate \\u%04x not followed by a low surrogate", r)
	}
	p.pos += 2
	lo, err := p.hex4()
	if err != nil {
		return 0, err
	}
	if lo < 0xDC00 || lo > 0xDFFF {
		return 0, p.fail(ErrInvalidUnicode, "high surrogate \\u%04x followed by \\u%04x, not a low surrogate", r, lo)
	}
	return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), nil
}

// hex4 reads the four hex digits of a \u escape.
func (p *parser) hex4() (rune, error) {
	if len(p.in)-p.pos < 4 {
		return 0, p.fail(ErrSyntax, "truncated \\u escape")
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.fail(ErrSyntax, "invalid hex digit %q in \\u escape", c)
		}
		r = r<<4 | rune(d)
	}
	p.pos += 4
	return r, nil
}

const lowerHex = "0123456789abcdef"

// appendRune writes one decoded string character per RFC 8785 §3.2.2.2:
// the two-character escapes where JSON has them, \u00xx for the other
// control characters, and literal UTF-8 for everything else.
func appendRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		return append(dst, '\\', 'u', '0', '0', lowerHex[r>>4], lowerHex[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

// number validates the RFC 8259 number at p.pos, reads it as a double and
// writes it in ECMAScript form.
func (p *parser) number() error {
	in := p.in
	start := p.pos
	if in[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(in) && in[p.pos] == '0':
		p.pos++
	case p.pos < len(in) && '1' <= in[p.pos] && in[p.pos] <= '9':
		for p.pos < len(in) && '0' <= in[p.pos] && in[p.pos] <= '9' {
			p.pos++
		}
	default:
		return p.unexpected("in number, expected a digit")
	}
	intEnd := p.pos
	if p.pos < len(in) && in[p.pos] == '.' {
		p.pos++
		if !p.digits() {
			return p.unexpected("in number, expected a digit after '.'")
		}
	}
	if p.pos < len(in) && (in[p.pos] == 'e' || in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(in) && (in[p.pos] == '+' || in[p.pos] == '-') {
			p.pos++
		}
		if !p.digits() {
			return p.unexpected("in number, expected a digit in the exponent")
		}
	}
	lit := in[start:p.pos]

	// Fast path: a plain integer of at most 15 digits is exactly
	// representable and, since JSON forbids leading zeros, already in
	// canonical form (apart from -0).
	if intEnd == p.pos && len(lit) <= 15 {
		if string(lit) == "-0" {
			p.out = append(p.out, '0')
		} else {
			p.out = append(p.out, lit...)
		}
		return nil
	}

	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		// The grammar was checked above, so the only failure left is a
		// magnitude beyond the largest double. Underflow reads as 0 without
		// error, which is the IEEE 754 answer RFC 8785 asks for.
		p.pos = start
		return p.fail(ErrNumberRange, "number %.40q does not fit in a double", lit)
	}
	p.out = appendNumber(p.out, f)
	return nil
}

func (p *parser) digits() bool {
	start := p.pos
	for p.pos < len(p.in) && '0' <= p.in[p.pos] && p.in[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}

// appendNumber writes a finite double as ECMAScript's Number::toString does
// (ECMA-262 §6.1.6.1.20, RFC 8785 §3.2.2.3). strconv's shortest formatting
// yields the same digits, as both pick the shortest string that reads back
// to f and, among those, the one closest to f; only the layout differs.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // both +0 and -0
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// 'e' with shortest precision gives "d.ddddde±xx" or "de±xx".
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	var digits [24]byte
	k := 0
	i := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits[k] = e[i]
			k++
		}
	}
	exp, _ := strconv.Atoi(string(e[i+1:]))
	// In ECMA-262 terms: the value is 0.d1d2…dk × 10^n.
	n := exp + 1
	d := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// AppendString appends the canonical (RFC 8785) JSON form of s to dst:
// what Canonicalize makes of json.Marshal(s). As json.Marshal does, it
// writes each byte of s that is not valid UTF-8 as U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		start := i
		for i < len(s) {
			c := s[i]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			i++
		}
		dst = append(dst, s[start:i]...)
		if i >= len(s) {
			break
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		// An invalid byte decodes as RuneError of width 1, and is written
		// as RuneError: U+FFFD.
		dst = appendRune(dst, r)
		i += size
	}
	return append(dst, '"')
}
