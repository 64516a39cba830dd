package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries a request's signature (see Sign).
const SignatureHeader = "Countersign-Signature"

// DefaultTolerance is how far a signature's timestamp may be from the
// verifier's clock, either way, when Verify is given no tolerance.
const DefaultTolerance = 5 * time.Minute

// ErrInvalidSignature is matched by every error Verify returns.
var ErrInvalidSignature = errors.New("invalid webhook signature")

// maxSignatureHeader bounds the header Verify parses, and so its work.
const maxSignatureHeader = 4096

// Sign returns the value of the Countersign-Signature header for body sent
// at t: "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>".
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a Countersign-Signature header against the raw request body:
// one of its v1 signatures must be the HMAC of the body under secret (compared
// in constant time), and its timestamp must be within tolerance of now
// (DefaultTolerance when tolerance is not positive), which bounds how long a
// captured request can be replayed. A backend should also deduplicate executes
// by operation id, as it must anyway. Every error matches ErrInvalidSignature.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secret) == 0 {
		return fmt.Errorf("%w: no secret to verify with", ErrInvalidSignature)
	}
	if len(header) > maxSignatureHeader {
		return fmt.Errorf("%w: header longer than %d bytes", ErrInvalidSignature, maxSignatureHeader)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%w: malformed element %q", ErrInvalidSignature, excerpt([]byte(part), 32))
		}
		switch k {
		case "t":
			if ts != "" {
				return fmt.Errorf("%w: more than one timestamp", ErrInvalidSignature)
			}
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
		// Other schemes are ignored, so that a sender may add one before
		// every verifier knows it.
	}
	if ts == "" {
		return fmt.Errorf("%w: no timestamp", ErrInvalidSignature)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrInvalidSignature)
	}
	// Digits only (no sign, no spaces): the signed text is the timestamp
	// exactly as sent, so it must have one spelling ParseInt agrees with.
	if len(ts) > 18 || strings.Trim(ts, "0123456789") != "" {
		return fmt.Errorf("%w: timestamp %q is not unix seconds", ErrInvalidSignature, excerpt([]byte(ts), 32))
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not unix seconds", ErrInvalidSignature, ts)
	}
	// Sub saturates instead of overflowing, whatever the two times are.
	if skew := now.Sub(time.Unix(sec, 0)); skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: timestamp %s is %v from now, beyond the %v tolerance", ErrInvalidSignature, ts, skew.Truncate(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		got, err := hex.DecodeString(s)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches the body", ErrInvalidSignature)
}
