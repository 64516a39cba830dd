package cursor

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits and sizes of the format.
const (
	// KeySize is the length of keys made by NewKey and the shortest key
	// NewCodec accepts: HMAC-SHA256 gains nothing from longer keys and
	// loses strength with shorter ones.
	KeySize = 32
	// MaxLen is the longest string Decode looks at. It is checked before
	// any decoding, so oversized input costs nothing.
	MaxLen = 512
	// MaxIDLen is the longest Position.ID that Encode accepts; with it,
	// every cursor Encode makes fits within MaxLen.
	MaxIDLen = 256

	version   = 1
	tagSize   = 16 // truncated HMAC-SHA256: 128 bits is ample against forgery
	headerLen = 1 + 8
	minRaw    = headerLen + tagSize
)

// domain separates cursor tags from any other HMAC made with the same key.
const domain = "countersign/cursor\x00"

// Range of CreatedAt that Unix nanoseconds can represent (years 1677–2262).
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

var (
	// ErrInvalid is wrapped by every Decode error: the string is not a
	// cursor this Codec made, whether malformed, tampered with, truncated,
	// too long or made under another key.
	ErrInvalid = errors.New("invalid cursor")
	// ErrShortKey is wrapped by NewCodec's error for keys under KeySize
	// bytes.
	ErrShortKey = errors.New("cursor key too short")
)

// Position is the sort key of the last row on a page: the next page starts
// strictly after it in (CreatedAt, ID) descending order.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// Codec encodes and decodes cursors under one secret key. It is safe for
// concurrent use.
type Codec struct {
	key []byte
}

// NewCodec returns a Codec that authenticates cursors with key, which must
// be at least KeySize bytes and should come from NewKey. Every process that
// serves the same API must share the key, or cursors fail across them.
func NewCodec(key []byte) (*Codec, error) {
	if len(key) < KeySize {
		return nil, fmt.Errorf("new cursor codec: key is %d bytes, want at least %d: %w", len(key), KeySize, ErrShortKey)
	}
	// Copied so that later changes to the caller's slice cannot change
	// which cursors verify.
	return &Codec{key: append([]byte(nil), key...)}, nil
}

// NewKey returns KeySize random bytes from crypto/rand for NewCodec.
func NewKey() []byte {
	key := make([]byte, KeySize)
	// crypto/rand.Read never fails since Go 1.24; it aborts the program
	// rather than return weak bytes.
	_, _ = rand.Read(key)
	return key
}

// Encode returns the cursor for p. CreatedAt keeps its nanoseconds; its
// location and monotonic reading are dropped, and Decode returns it in UTC.
//
// Encode panics if p.ID is longer than MaxIDLen bytes or p.CreatedAt is
// outside what Unix nanoseconds can hold (years 1677–2262, so not the zero
// time). Positions come from stored rows, so either is a programming error,
// and a cursor that silently decoded to a different position would skip or
// repeat rows.
func (c *Codec) Encode(p Position) string {
	if len(p.ID) > MaxIDLen {
		panic(fmt.Sprintf("cursor: Encode: ID is %d bytes, longer than MaxIDLen (%d)", len(p.ID), MaxIDLen))
	}
	if p.CreatedAt.Before(minTime) || p.CreatedAt.After(maxTime) {
		panic(fmt.Sprintf("cursor: Encode: CreatedAt %v is outside the range of Unix nanoseconds", p.CreatedAt))
	}
	raw := make([]byte, headerLen, headerLen+len(p.ID)+tagSize)
	raw[0] = version
	binary.BigEndian.PutUint64(raw[1:headerLen], uint64(p.CreatedAt.UnixNano()))
	raw = append(raw, p.ID...)
	raw = c.appendTag(raw, raw)
	return encoding.EncodeToString(raw)
}

// encoding is strict so that a cursor has exactly one spelling: lenient
// base64 would let the unused low bits of the last character vary without
// changing the bytes, and so without failing the tag.
var encoding = base64.RawURLEncoding.Strict()

// Decode returns the Position in s, or an error wrapping ErrInvalid if s is
// not a cursor that this Codec's key produced.
func (c *Codec) Decode(s string) (Position, error) {
	if len(s) > MaxLen {
		return Position{}, invalid("%d characters, longer than %d", len(s), MaxLen)
	}
	// The base64 decoder skips CR and LF even in strict mode; reject them,
	// and everything else outside the alphabet, so that no two strings
	// decode to one cursor.
	for i := 0; i < len(s); i++ {
		if !isURLSafe(s[i]) {
			return Position{}, invalid("character %q at %d is not base64url", s[i], i)
		}
	}
	raw, err := encoding.DecodeString(s)
	if err != nil {
		return Position{}, invalid("base64: %v", err)
	}
	if len(raw) < minRaw {
		return Position{}, invalid("%d bytes, shorter than %d", len(raw), minRaw)
	}
	body, tag := raw[:len(raw)-tagSize], raw[len(raw)-tagSize:]
	// Authenticate before interpreting any byte, and in constant time so
	// the comparison leaks nothing about the expected tag.
	if !hmac.Equal(tag, c.appendTag(nil, body)) {
		return Position{}, invalid("authentication failed")
	}
	if body[0] != version {
		return Position{}, invalid("unknown version %d", body[0])
	}
	nanos := int64(binary.BigEndian.Uint64(body[1:headerLen]))
	return Position{
		CreatedAt: time.Unix(0, nanos).UTC(),
		ID:        string(body[headerLen:]),
	}, nil
}

// appendTag appends the truncated HMAC of body to dst.
func (c *Codec) appendTag(dst, body []byte) []byte {
	mac := hmac.New(sha256.New, c.key)
	mac.Write([]byte(domain))
	mac.Write(body)
	var sum [sha256.Size]byte
	return append(dst, mac.Sum(sum[:0])[:tagSize]...)
}

func isURLSafe(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '_'
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("decode cursor: %w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
