package webhook_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/webhook"
)

var testSecret = []byte("whsec_test_0123456789abcdef")

func TestSignFormatAndVerify(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_700_000_000, 0)
	body := []byte(`{"action":"payments.refund"}`)
	h := webhook.Sign(testSecret, at, body)
	// A known answer, computed independently (Python's hmac module).
	const want = "t=1700000000,v1=7e4e88f6547d8118075cc36ffa5e761a65880d3ff313407d218679f22ee1c88c"
	if h != want {
		t.Fatalf("Sign = %q, want %q", h, want)
	}
	sig := strings.TrimPrefix(h, "t=1700000000,v1=")
	cases := []struct {
		name      string
		secret    []byte
		header    string
		body      []byte
		now       time.Time
		tolerance time.Duration
		ok        bool
	}{
		{name: "valid", header: h, body: body, now: at, ok: true},
		{name: "valid with spaces", header: "t=1700000000, v1=" + sig, body: body, now: at, ok: true},
		{name: "rotated: any v1 may match", header: "t=1700000000,v1=" + strings.Repeat("0", 64) + ",v1=" + sig, body: body, now: at, ok: true},
		{name: "unknown scheme ignored", header: "t=1700000000,v0=abc,v1=" + sig, body: body, now: at, ok: true},
		{name: "within tolerance", header: h, body: body, now: at.Add(4 * time.Minute), ok: true},
		{name: "within tolerance, clock behind", header: h, body: body, now: at.Add(-4 * time.Minute), ok: true},
		{name: "custom tolerance", header: h, body: body, now: at.Add(50 * time.Minute), tolerance: time.Hour, ok: true},
		{name: "stale", header: h, body: body, now: at.Add(6 * time.Minute)},
		{name: "from the future", header: h, body: body, now: at.Add(-6 * time.Minute)},
		{name: "body changed", header: h, body: []byte(`{"action":"payments.refunds"}`), now: at},
		{name: "other secret", secret: []byte("another"), header: h, body: body, now: at},
		{name: "empty secret", secret: []byte{}, header: webhook.Sign(nil, at, body), body: body, now: at},
		{name: "timestamp changed", header: "t=1700000001,v1=" + sig, body: body, now: at},
		{name: "no timestamp", header: "v1=" + sig, body: body, now: at},
		{name: "two timestamps", header: "t=1700000000,t=1700000000,v1=" + sig, body: body, now: at},
		{name: "no signature", header: "t=1700000000", body: body, now: at},
		{name: "signed timestamp spelled with a sign", header: "t=+1700000000,v1=" + sig, body: body, now: at},
		{name: "negative timestamp", header: "t=-1,v1=" + sig, body: body, now: at},
		{name: "not hex", header: "t=1700000000,v1=zz" + sig[2:], body: body, now: at},
		{name: "short signature", header: "t=1700000000,v1=" + sig[:62], body: body, now: at},
		{name: "malformed", header: "garbage", body: body, now: at},
		{name: "empty", header: "", body: body, now: at},
		{name: "huge", header: h + strings.Repeat(",v1=00", 1000), body: body, now: at},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			secret := testSecret
			if tc.secret != nil {
				secret = tc.secret
			}
			err := webhook.Verify(secret, tc.header, tc.body, tc.now, tc.tolerance)
			if tc.ok && err != nil {
				t.Fatalf("Verify = %v, want ok", err)
			}
			if !tc.ok && !errors.Is(err, webhook.ErrInvalidSignature) {
				t.Fatalf("Verify = %v, want ErrInvalidSignature", err)
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	at := time.Unix(1_700_000_000, 0)
	f.Add(webhook.Sign(testSecret, at, []byte(`{}`)), []byte(`{}`), int64(1_700_000_000), int64(0))
	f.Add("t=1700000000,v1=00", []byte(`x`), int64(0), int64(-1))
	f.Add("t=,v1=,,=,t", []byte(nil), int64(-1<<63), int64(1<<62))
	f.Add("t=999999999999999999,v1="+strings.Repeat("a", 64), []byte("body"), int64(1<<62), int64(1))
	f.Fuzz(func(t *testing.T, header string, body []byte, now, tolerance int64) {
		// Any input: an answer, never a panic; a refusal is always typed.
		if err := webhook.Verify(testSecret, header, body, time.Unix(now, 0), time.Duration(tolerance)); err != nil && !errors.Is(err, webhook.ErrInvalidSignature) {
			t.Fatalf("Verify = %v, not ErrInvalidSignature", err)
		}
		// What Sign produces, Verify accepts at that time.
		sec := now & (1<<59 - 1) // a timestamp of at most 18 digits
		if err := webhook.Verify(testSecret, webhook.Sign(testSecret, time.Unix(sec, 0), body), body, time.Unix(sec, 0), 0); err != nil {
			t.Fatalf("Verify(Sign(t=%s)) = %v", strconv.FormatInt(sec, 10), err)
		}
	})
}
