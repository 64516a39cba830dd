// Package cursor makes the opaque page tokens that list endpoints hand out
// for keyset pagination.
//
// Lists are ordered newest first by (created_at, id), so the next page is
// the rows strictly after the last row of this one:
//
//	WHERE (created_at, id) < ($1, $2) ORDER BY created_at DESC, id DESC
//
// A cursor carries that last row's Position. It is opaque so that clients
// cannot come to depend on its contents, and tamper-evident so that a client
// cannot steer the query to an arbitrary position (for example to probe for
// the existence of IDs it was never shown). Keyset cursors stay correct
// while rows are inserted, unlike offsets.
//
// Format, version 1:
//
//	base64url-without-padding( 0x01 | created_at | id | tag )
//
// where created_at is the Unix time in nanoseconds as a big-endian int64, id
// is the raw bytes of the ID, and tag is the first 16 bytes of HMAC-SHA256,
// under the Codec's key, of a fixed domain label followed by everything
// before the tag. The leading version byte lets a later format be told apart
// rather than misread.
//
// Decode rejects any string that Encode did not produce with the same key:
// every such failure wraps ErrInvalid, and callers should answer it as a bad
// request without further detail. The tag is compared in constant time, and
// the decoding is strict, so each accepted cursor has exactly one spelling.
package cursor
