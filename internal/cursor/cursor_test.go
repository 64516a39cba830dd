package cursor_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/cursor"
)

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func testCodec(t testing.TB, seed byte) *cursor.Codec {
	t.Helper()
	c, err := cursor.NewCodec(bytes.Repeat([]byte{seed}, cursor.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewCodec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		keyLen  int
		wantErr error
	}{
		{"nil key", 0, cursor.ErrShortKey},
		{"16 bytes", 16, cursor.ErrShortKey},
		{"one short", cursor.KeySize - 1, cursor.ErrShortKey},
		{"exactly KeySize", cursor.KeySize, nil},
		{"longer", 64, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var key []byte
			if tt.keyLen > 0 {
				key = bytes.Repeat([]byte{7}, tt.keyLen)
			}
			c, err := cursor.NewCodec(key)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewCodec(%d bytes) error = %v, want %v", tt.keyLen, err, tt.wantErr)
			}
			if (c == nil) != (tt.wantErr != nil) {
				t.Errorf("NewCodec(%d bytes) codec = %v with error %v", tt.keyLen, c, err)
			}
		})
	}
}

func TestNewCodecCopiesKey(t *testing.T) {
	t.Parallel()
	key := cursor.NewKey()
	c, err := cursor.NewCodec(key)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Encode(cursor.Position{CreatedAt: time.Unix(1, 0), ID: "a"})
	for i := range key {
		key[i] ^= 0xff
	}
	if _, err := c.Decode(s); err != nil {
		t.Errorf("changing the caller's key slice broke the codec: %v", err)
	}
}

func TestNewKey(t *testing.T) {
	t.Parallel()
	a, b := cursor.NewKey(), cursor.NewKey()
	if len(a) != cursor.KeySize || len(b) != cursor.KeySize {
		t.Fatalf("NewKey lengths %d, %d; want %d", len(a), len(b), cursor.KeySize)
	}
	if bytes.Equal(a, b) {
		t.Error("two NewKey calls returned the same key")
	}
	if _, err := cursor.NewCodec(a); err != nil {
		t.Errorf("NewCodec rejects NewKey's key: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	c := testCodec(t, 1)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		paris = time.FixedZone("CET", 3600)
	}
	tests := []struct {
		name string
		pos  cursor.Position
	}{
		{"typical", cursor.Position{time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC), "018f3c1e-7b6a-7c4d-9e2f-0123456789ab"}},
		{"nanosecond precision", cursor.Position{time.Date(2025, 1, 1, 0, 0, 0, 1, time.UTC), "x"}},
		{"last nanosecond of a second", cursor.Position{time.Date(2025, 1, 1, 0, 0, 0, 999999999, time.UTC), "x"}},
		{"non-UTC location", cursor.Position{time.Date(2025, 7, 1, 12, 0, 0, 123456789, paris), "p"}},
		{"fixed zone", cursor.Position{time.Date(2024, 2, 29, 23, 59, 59, 5, time.FixedZone("", -7*3600)), "z"}},
		{"with monotonic reading", cursor.Position{time.Now(), "now"}},
		{"epoch", cursor.Position{time.Unix(0, 0), "e"}},
		{"before epoch", cursor.Position{time.Unix(-1, 1), "b"}},
		{"earliest", cursor.Position{time.Unix(0, math.MinInt64), "min"}},
		{"latest", cursor.Position{time.Unix(0, math.MaxInt64), "max"}},
		{"empty ID", cursor.Position{time.Unix(1700000000, 0), ""}},
		{"unicode ID", cursor.Position{time.Unix(1700000000, 0), "jöb-😀"}},
		{"binary ID", cursor.Position{time.Unix(1700000000, 0), "\x00\xff\x01"}},
		{"longest ID", cursor.Position{time.Unix(1700000000, 0), strings.Repeat("i", cursor.MaxIDLen)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := c.Encode(tt.pos)
			if len(s) > cursor.MaxLen {
				t.Errorf("cursor is %d characters, over MaxLen %d", len(s), cursor.MaxLen)
			}
			if strings.Trim(s, alphabet) != "" {
				t.Errorf("cursor %q has characters outside base64url", s)
			}
			if again := c.Encode(tt.pos); again != s {
				t.Errorf("Encode not deterministic: %q then %q", s, again)
			}
			got, err := c.Decode(s)
			if err != nil {
				t.Fatalf("Decode(Encode(%v)): %v", tt.pos, err)
			}
			if got.ID != tt.pos.ID {
				t.Errorf("ID = %q, want %q", got.ID, tt.pos.ID)
			}
			if !got.CreatedAt.Equal(tt.pos.CreatedAt) || got.CreatedAt.UnixNano() != tt.pos.CreatedAt.UnixNano() {
				t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, tt.pos.CreatedAt)
			}
			if got.CreatedAt.Location() != time.UTC {
				t.Errorf("CreatedAt location = %v, want UTC", got.CreatedAt.Location())
			}
			if want := tt.pos.CreatedAt.Round(0).UTC(); got.CreatedAt != want {
				t.Errorf("CreatedAt = %#v, want exactly %#v", got.CreatedAt, want)
			}
		})
	}
}

func TestDistinctPositionsDistinctCursors(t *testing.T) {
	t.Parallel()
	c := testCodec(t, 1)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	positions := []cursor.Position{
		{base, "a"},
		{base.Add(time.Nanosecond), "a"},
		{base, "b"},
		{base, "a\x00"},
		{base, ""},
	}
	seen := map[string]cursor.Position{}
	for _, p := range positions {
		s := c.Encode(p)
		if prev, ok := seen[s]; ok {
			t.Errorf("%v and %v share cursor %q", prev, p, s)
		}
		seen[s] = p
	}
}

func TestEncodePanicsOutOfRange(t *testing.T) {
	t.Parallel()
	c := testCodec(t, 1)
	tests := []struct {
		name string
		pos  cursor.Position
	}{
		{"ID too long", cursor.Position{time.Unix(0, 0), strings.Repeat("i", cursor.MaxIDLen+1)}},
		{"zero time", cursor.Position{time.Time{}, "a"}},
		{"before 1677", cursor.Position{time.Unix(0, math.MinInt64).Add(-time.Nanosecond), "a"}},
		{"after 2262", cursor.Position{time.Unix(0, math.MaxInt64).Add(time.Nanosecond), "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Errorf("Encode(%v) did not panic", tt.pos)
				}
			}()
			c.Encode(tt.pos)
		})
	}
}

// TestTamper changes a valid cursor in every way a client could: each
// character replaced by every other base64url character, each bit of the
// decoded bytes flipped, truncation to every length, and extension.
func TestTamper(t *testing.T) {
	t.Parallel()
	c := testCodec(t, 1)
	s := c.Encode(cursor.Position{time.Date(2025, 5, 6, 7, 8, 9, 10, time.UTC), "018f3c1e-7b6a-7c4d-9e2f-0123456789ab"})

	reject := func(t *testing.T, what, bad string) {
		t.Helper()
		if bad == s {
			return
		}
		if p, err := c.Decode(bad); !errors.Is(err, cursor.ErrInvalid) {
			t.Fatalf("%s: Decode(%q) = %v, %v; want ErrInvalid", what, bad, p, err)
		}
	}

	t.Run("replace each character", func(t *testing.T) {
		t.Parallel()
		for i := range len(s) {
			for _, r := range alphabet + "=+/ .~\n\r\x00é" {
				reject(t, fmt.Sprintf("position %d → %q", i, r), s[:i]+string(r)+s[i+1:])
			}
		}
	})
	t.Run("flip each bit", func(t *testing.T) {
		t.Parallel()
		raw, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		for i := range raw {
			for bit := range 8 {
				mod := bytes.Clone(raw)
				mod[i] ^= 1 << bit
				reject(t, fmt.Sprintf("byte %d bit %d", i, bit), base64.RawURLEncoding.EncodeToString(mod))
			}
		}
	})
	t.Run("flip each bit of the string", func(t *testing.T) {
		t.Parallel()
		for i := range len(s) {
			for bit := range 8 {
				b := []byte(s)
				b[i] ^= 1 << bit
				reject(t, fmt.Sprintf("char %d bit %d", i, bit), string(b))
			}
		}
	})
	t.Run("truncate", func(t *testing.T) {
		t.Parallel()
		for n := range len(s) {
			reject(t, fmt.Sprintf("prefix %d", n), s[:n])
			reject(t, fmt.Sprintf("suffix from %d", n+1), s[n+1:])
		}
	})
	t.Run("extend", func(t *testing.T) {
		t.Parallel()
		for _, r := range alphabet + "=\n\r " {
			reject(t, fmt.Sprintf("append %q", r), s+string(r))
			reject(t, fmt.Sprintf("prepend %q", r), string(r)+s)
			reject(t, fmt.Sprintf("insert %q", r), s[:10]+string(r)+s[10:])
		}
		reject(t, "doubled", s+s)
		reject(t, "padded", s+strings.Repeat("=", (4-len(s)%4)%4))
	})
	t.Run("splice", func(t *testing.T) {
		t.Parallel()
		// The body of one valid cursor with the tag of another.
		other := c.Encode(cursor.Position{time.Date(2025, 5, 6, 7, 8, 9, 11, time.UTC), "018f3c1e-7b6a-7c4d-9e2f-0123456789ab"})
		a, _ := base64.RawURLEncoding.DecodeString(s)
		b, _ := base64.RawURLEncoding.DecodeString(other)
		spliced := append(bytes.Clone(b[:len(b)-16]), a[len(a)-16:]...)
		reject(t, "spliced", base64.RawURLEncoding.EncodeToString(spliced))
	})
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	c := testCodec(t, 1)
	valid := c.Encode(cursor.Position{time.Unix(1700000000, 42), "job-1"})
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"one character", "A"},
		{"garbage", "not a cursor!"},
		{"JSON", `{"created_at":1,"id":"x"}`},
		{"standard base64 alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(valid) + "+/"},
		{"padded", base64.URLEncoding.EncodeToString([]byte("0123456789abcdefghijklmnopqrstuvwxyz"))},
		{"well-formed but short", base64.RawURLEncoding.EncodeToString(make([]byte, 24))},
		{"well-formed zeros", base64.RawURLEncoding.EncodeToString(make([]byte, 64))},
		{"from another key", testCodec(t, 2).Encode(cursor.Position{time.Unix(1700000000, 42), "job-1"})},
		{"from a random key", mustCodec(t, cursor.NewKey()).Encode(cursor.Position{time.Unix(1700000000, 42), "job-1"})},
		{"surrounding spaces", " " + valid + " "},
		{"line break inside", valid[:8] + "\n" + valid[8:]},
		{"CRLF at end", valid + "\r\n"},
		{"overlong", strings.Repeat("A", cursor.MaxLen+1)},
		{"overlong valid prefix", valid + strings.Repeat("A", cursor.MaxLen)},
		{"huge", strings.Repeat("A", 1<<20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := c.Decode(tt.in)
			if !errors.Is(err, cursor.ErrInvalid) {
				t.Fatalf("Decode(%.40q) = %v, %v; want ErrInvalid", tt.in, p, err)
			}
			if p != (cursor.Position{}) {
				t.Errorf("Decode returned position %v with its error", p)
			}
		})
	}
}

func mustCodec(t testing.TB, key []byte) *cursor.Codec {
	t.Helper()
	c, err := cursor.NewCodec(key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	c := testCodec(t, 3)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				p := cursor.Position{time.Unix(int64(g), int64(i)).UTC(), fmt.Sprintf("g%d-%d", g, i)}
				got, err := c.Decode(c.Encode(p))
				if err != nil || got != p {
					t.Errorf("round trip of %v = %v, %v", p, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkDecode(b *testing.B) {
	c := testCodec(b, 1)
	s := c.Encode(cursor.Position{time.Now(), "018f3c1e-7b6a-7c4d-9e2f-0123456789ab"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(s); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleCodec() {
	codec, err := cursor.NewCodec(cursor.NewKey())
	if err != nil {
		fmt.Println(err)
		return
	}
	last := cursor.Position{CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), ID: "job-42"}
	token := codec.Encode(last)

	next, err := codec.Decode(token)
	fmt.Println(next.CreatedAt.Format(time.RFC3339Nano), next.ID, err)

	_, err = codec.Decode(token[:len(token)-1])
	fmt.Println(errors.Is(err, cursor.ErrInvalid))
	// Output:
	// 2025-01-02T03:04:05.000000006Z job-42 <nil>
	// true
}
