package cursor_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/cursor"
)

// FuzzDecode checks that Decode never panics, that every failure wraps
// ErrInvalid, and that whatever it accepts re-encodes to the same string, so
// no cursor has two spellings.
func FuzzDecode(f *testing.F) {
	c := testCodec(f, 1)
	for _, p := range []cursor.Position{
		{time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), "018f3c1e-7b6a-7c4d-9e2f-0123456789ab"},
		{time.Unix(0, 0), ""},
		{time.Unix(0, math.MinInt64), "\x00"},
	} {
		s := c.Encode(p)
		f.Add(s)
		f.Add(s[:len(s)-1])
		f.Add(s + "A")
		f.Add("A" + s)
	}
	for _, s := range []string{"", "A", "AA", "AAA=", "====", "\n", "+/+/", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := c.Decode(s)
		if err != nil {
			if !errors.Is(err, cursor.ErrInvalid) {
				t.Fatalf("Decode(%q) error %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		if again := c.Encode(p); again != s {
			t.Fatalf("Decode accepted %q but it re-encodes as %q", s, again)
		}
	})
}

// FuzzRoundTrip checks that every encodable position survives a round trip.
func FuzzRoundTrip(f *testing.F) {
	c := testCodec(f, 1)
	f.Add(int64(0), "")
	f.Add(int64(1735787045000000006), "018f3c1e-7b6a-7c4d-9e2f-0123456789ab")
	f.Add(int64(math.MinInt64), "\xff")
	f.Add(int64(math.MaxInt64), "jöb")
	f.Fuzz(func(t *testing.T, nanos int64, id string) {
		if len(id) > cursor.MaxIDLen {
			id = id[:cursor.MaxIDLen]
		}
		want := cursor.Position{CreatedAt: time.Unix(0, nanos).UTC(), ID: id}
		s := c.Encode(want)
		if len(s) > cursor.MaxLen {
			t.Fatalf("cursor of %d characters exceeds MaxLen", len(s))
		}
		got, err := c.Decode(s)
		if err != nil {
			t.Fatalf("Decode(Encode(%v)): %v", want, err)
		}
		if got != want {
			t.Fatalf("round trip: got %v, want %v", got, want)
		}
	})
}
