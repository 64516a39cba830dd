// Package canonjson turns JSON text into its RFC 8785 canonical form (the
// JSON Canonicalization Scheme, JCS) and digests that form.
//
// Countersign hashes every tool call's input so that an approval granted for
// one input can never be replayed against another. Two clients that send the
// same value with different key order, whitespace, escapes or number
// spellings must therefore produce the same digest, and that is exactly what
// JCS guarantees:
//
//   - object members are sorted by the UTF-16 code units of their keys;
//   - there is no insignificant whitespace;
//   - strings use only the mandatory escapes (\" \\ \b \f \n \r \t and
//     lowercase \u00XX for the remaining control characters), everything
//     else is literal UTF-8;
//   - numbers are read as IEEE 754 doubles and written the way ECMAScript's
//     Number.prototype.toString writes them (shortest round-trip digits,
//     1e+21 and 1e-7 style exponents, -0 as 0).
//
// Because a digest is only as trustworthy as the parse behind it, input that
// RFC 8785 (through I-JSON, RFC 7493) forbids is rejected rather than
// repaired: invalid JSON, trailing data, duplicate object keys, invalid UTF-8,
// lone surrogate escapes and numbers outside the double range. Silently
// picking one of two duplicate keys, for instance, would let two parties
// agree on a digest while reading different values. Every rejection is an
// *Error whose cause matches one of the Err* sentinels with errors.Is.
//
// The parser is hand-written rather than built on encoding/json's token
// stream because this runs on every call; it makes one pass over the input
// and, for Digest, allocates almost nothing.
package canonjson
