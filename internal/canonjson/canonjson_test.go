package canonjson_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/canonjson"
)

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"null", `null`, `null`},
		{"true", `true`, `true`},
		{"false", ` false `, `false`},
		{"string scalar", `"x"`, `"x"`},
		{"number scalar", `42`, `42`},
		{"surrounding whitespace", " \t\r\n{ } \n", `{}`},
		{"empty object", `{}`, `{}`},
		{"empty array", `[ ]`, `[]`},
		{"whitespace everywhere", "{ \"a\" :\t[ 1 ,\n2 , { } ] ,\r\"b\" : null }", `{"a":[1,2,{}],"b":null}`},
		{"keys sorted", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"already sorted", `{"a":1,"b":2}`, `{"a":1,"b":2}`},
		{"prefix key sorts first", `{"ab":1,"a":2}`, `{"a":2,"ab":1}`},
		{"case sorts by code unit", `{"a":1,"B":2,"A":3}`, `{"A":3,"B":2,"a":1}`},
		{"nested objects sorted", `{"z":{"y":1,"x":2},"a":[{"d":1,"c":2}]}`, `{"a":[{"c":2,"d":1}],"z":{"x":2,"y":1}}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
		{"keys sorted after decoding escapes", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"escaped key sorted by decoded value", `{"\n":1,"\u0009":2,"!":3}`, `{"\t":2,"\n":1,"!":3}`},
		{"deep nesting", `[[[[{"b":[{"d":0,"c":0}],"a":0}]]]]`, `[[[[{"a":0,"b":[{"c":0,"d":0}]}]]]]`},

		// Strings, RFC 8785 §3.2.2.2.
		{"solidus unescaped", `"\/"`, `"/"`},
		{"unicode escape to literal", `"\u0041\u00e9\u20AC"`, `"Aé€"`},
		{"surrogate pair to literal", `"\uD83D\uDE00"`, `"😀"`},
		{"short escapes kept", `"\"\\\b\f\n\r\t"`, `"\"\\\b\f\n\r\t"`},
		{"short escapes from u", `"\u0022\u005c\u0008\u000c\u000a\u000d\u0009"`, `"\"\\\b\f\n\r\t"`},
		{"other controls lowercase hex", `"\u0000\u001F\u000B\u001e"`, `"\u0000\u001f\u000b\u001e"`},
		{"DEL literal", `"\u007f"`, "\"\x7f\""},
		{"C1 control literal", `"\u0080"`, "\"\u0080\""},
		{"line separators literal", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"literal UTF-8 kept", `"héllo, 世界 😀"`, `"héllo, 世界 😀"`},
		{"U+FFFD literal accepted", "\"\uFFFD\"", "\"\uFFFD\""},
		{"noncharacter accepted", `"\uFFFF"`, "\"\uFFFF\""},
		{"max code point", `"\uDBFF\uDFFF"`, "\"\U0010FFFF\""},

		// Numbers, RFC 8785 §3.2.2.3.
		{"zero", `0`, `0`},
		{"negative zero", `-0`, `0`},
		{"negative zero fraction", `-0.0`, `0`},
		{"negative zero exponent", `-0e10`, `0`},
		{"trailing fraction zeros", `4.50`, `4.5`},
		{"integral fraction", `1.0`, `1`},
		{"exponent to integer", `1E2`, `100`},
		{"negative exponent", `2e-3`, `0.002`},
		{"plus exponent", `1e+2`, `100`},
		{"leading zero exponent", `1e002`, `100`},
		{"negative", `-12.5`, `-12.5`},
		{"15 digit integer", `999999999999999`, `999999999999999`},
		{"16 digit integer", `1234567890123456`, `1234567890123456`},
		{"beyond 2^53", `123456789012345678`, `123456789012345680`},
		{"largest positional", `1e20`, `100000000000000000000`},
		{"first exponent form", `1e21`, `1e+21`},
		{"big with fraction digits", `1.5e300`, `1.5e+300`},
		{"smallest positional", `0.000001`, `0.000001`},
		{"first negative exponent form", `0.0000001`, `1e-7`},
		{"small with digits", `-1.25e-7`, `-1.25e-7`},
		{"one third", `0.3333333333333333333333`, `0.3333333333333333`},
		{"tenth", `0.1`, `0.1`},
		{"underflow to zero", `1e-400`, `0`},
		{"negative underflow to zero", `-1e-400`, `0`},
		{"rounds to max double", `1.7976931348623158e308`, `1.7976931348623157e+308`},
		{"huge negative exponent", `1e-99999999999999999999`, `0`},
		{"long mantissa", `0.` + strings.Repeat("0", 400) + `1e400`, `0.1`},
		{"numbers in array", `[1,-1,0.5,-0.5,1e30]`, `[1,-1,0.5,-0.5,1e+30]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := canonjson.Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", ``, canonjson.ErrSyntax},
		{"whitespace only", "  \n", canonjson.ErrSyntax},
		{"byte order mark", "\uFEFF{}", canonjson.ErrSyntax},
		{"unclosed object", `{`, canonjson.ErrSyntax},
		{"unclosed array", `[1`, canonjson.ErrSyntax},
		{"unclosed nested", `{"a":[`, canonjson.ErrSyntax},
		{"trailing comma array", `[1,]`, canonjson.ErrSyntax},
		{"trailing comma object", `{"a":1,}`, canonjson.ErrSyntax},
		{"missing comma", `[1 2]`, canonjson.ErrSyntax},
		{"missing colon", `{"a" 1}`, canonjson.ErrSyntax},
		{"missing value", `{"a":}`, canonjson.ErrSyntax},
		{"non-string key", `{1:2}`, canonjson.ErrSyntax},
		{"single quotes", `{'a':1}`, canonjson.ErrSyntax},
		{"unterminated string", `"abc`, canonjson.ErrSyntax},
		{"raw tab in string", "\"a\tb\"", canonjson.ErrSyntax},
		{"raw newline in string", "\"a\nb\"", canonjson.ErrSyntax},
		{"raw NUL in string", "\"\x00\"", canonjson.ErrSyntax},
		{"bad escape", `"\x41"`, canonjson.ErrSyntax},
		{"escape at end", `"\`, canonjson.ErrSyntax},
		{"short unicode escape", `"\u12"`, canonjson.ErrSyntax},
		{"bad hex digit", `"\u12g4"`, canonjson.ErrSyntax},
		{"bad hex in low surrogate", `"\ud800\udcxx"`, canonjson.ErrSyntax},
		{"leading zero", `01`, canonjson.ErrSyntax},
		{"negative leading zero", `-01`, canonjson.ErrSyntax},
		{"plus sign", `+1`, canonjson.ErrSyntax},
		{"bare minus", `-`, canonjson.ErrSyntax},
		{"leading dot", `.5`, canonjson.ErrSyntax},
		{"trailing dot", `1.`, canonjson.ErrSyntax},
		{"empty exponent", `1e`, canonjson.ErrSyntax},
		{"signed empty exponent", `1e+`, canonjson.ErrSyntax},
		{"hex number", `0x10`, canonjson.ErrSyntax},
		{"NaN", `NaN`, canonjson.ErrSyntax},
		{"Infinity", `Infinity`, canonjson.ErrSyntax},
		{"minus Infinity", `-Infinity`, canonjson.ErrSyntax},
		{"truncated true", `tru`, canonjson.ErrSyntax},
		{"misspelt null", `nul1`, canonjson.ErrSyntax},
		{"capitalised literal", `True`, canonjson.ErrSyntax},
		{"trailing data", `{} x`, canonjson.ErrSyntax},
		{"two values", `1 2`, canonjson.ErrSyntax},
		{"two objects", `{}{}`, canonjson.ErrSyntax},
		{"trailing NUL", "{}\x00", canonjson.ErrSyntax},
		{"comment", `{} // c`, canonjson.ErrSyntax},
		{"non-JSON whitespace", "\v1", canonjson.ErrSyntax},

		{"duplicate key", `{"a":1,"a":2}`, canonjson.ErrDuplicateKey},
		{"duplicate key same value", `{"a":1,"b":0,"a":1}`, canonjson.ErrDuplicateKey},
		{"duplicate via escape", `{"a":1,"\u0061":2}`, canonjson.ErrDuplicateKey},
		{"duplicate via surrogate escape", `{"😀":1,"\ud83d\ude00":2}`, canonjson.ErrDuplicateKey},
		{"duplicate empty key", `{"":1,"":2}`, canonjson.ErrDuplicateKey},
		{"duplicate nested", `[{"x":{"k":1,"k":2}}]`, canonjson.ErrDuplicateKey},

		{"overflow", `1e309`, canonjson.ErrNumberRange},
		{"negative overflow", `-1e309`, canonjson.ErrNumberRange},
		{"overflow just above max", `1.7976931348623159e308`, canonjson.ErrNumberRange},
		{"overflow in object", `{"n":123e99999}`, canonjson.ErrNumberRange},

		{"invalid UTF-8 byte", "\"\xff\"", canonjson.ErrInvalidUnicode},
		{"truncated UTF-8", "\"\xe2\x82\"", canonjson.ErrInvalidUnicode},
		{"overlong UTF-8", "\"\xc0\xaf\"", canonjson.ErrInvalidUnicode},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", canonjson.ErrInvalidUnicode},
		{"beyond U+10FFFF", "\"\xf4\x90\x80\x80\"", canonjson.ErrInvalidUnicode},
		{"invalid UTF-8 in key", "{\"\xfe\":1}", canonjson.ErrInvalidUnicode},
		{"lone high surrogate", `"\ud800"`, canonjson.ErrInvalidUnicode},
		{"lone low surrogate", `"\udc00"`, canonjson.ErrInvalidUnicode},
		{"high then letter", `"\ud800x"`, canonjson.ErrInvalidUnicode},
		{"high then other escape", `"\ud800\n"`, canonjson.ErrInvalidUnicode},
		{"high then BMP escape", `"\ud800\u0041"`, canonjson.ErrInvalidUnicode},
		{"two high surrogates", `"\ud800\ud800"`, canonjson.ErrInvalidUnicode},
		{"reversed pair", `"\ude00\ud83d"`, canonjson.ErrInvalidUnicode},

		{"too deep arrays", deep(canonjson.MaxDepth + 1), canonjson.ErrTooDeep},
		{"too deep objects", strings.Repeat(`{"a":`, canonjson.MaxDepth+1) + `0` + strings.Repeat(`}`, canonjson.MaxDepth+1), canonjson.ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := canonjson.Canonicalize([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Canonicalize(%.60q) = %q, %v; want error %v", tt.in, got, err, tt.want)
			}
			if got != nil {
				t.Errorf("Canonicalize(%.60q) returned output %q with its error", tt.in, got)
			}
			var cerr *canonjson.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error %v is %T, want *canonjson.Error", err, err)
			}
			if cerr.Offset < 0 || cerr.Offset > len(tt.in) {
				t.Errorf("Offset = %d, outside input of %d bytes", cerr.Offset, len(tt.in))
			}
			if !strings.HasPrefix(err.Error(), "canonjson: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if _, derr := canonjson.Digest([]byte(tt.in)); !errors.Is(derr, tt.want) {
				t.Errorf("Digest error = %v, want %v", derr, tt.want)
			}
		})
	}
}

func TestErrorOffset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
	}{
		{`[1,2,x]`, 5},
		{`{"a":1} x`, 8},
		{"\"ab\xff\"", 3},
		{`"\q"`, 2},
		{`  1e400`, 2},
	}
	for _, tt := range tests {
		_, err := canonjson.Canonicalize([]byte(tt.in))
		var cerr *canonjson.Error
		if !errors.As(err, &cerr) {
			t.Fatalf("Canonicalize(%q) error = %v, want *Error", tt.in, err)
		}
		if cerr.Offset != tt.want {
			t.Errorf("Canonicalize(%q) offset = %d, want %d (%v)", tt.in, cerr.Offset, tt.want, err)
		}
	}
}

func TestMaxDepthAccepted(t *testing.T) {
	t.Parallel()
	n := canonjson.MaxDepth
	in := strings.Repeat("[", n) + strings.Repeat("]", n)
	got, err := canonjson.Canonicalize([]byte(in))
	if err != nil {
		t.Fatalf("nesting of exactly MaxDepth rejected: %v", err)
	}
	if string(got) != in {
		t.Errorf("output differs from already-canonical input")
	}
}

// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
func TestRFC8785AppendixBNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"}, // round to even
		// Not in the appendix, but named in the RFC's prose.
		{0x4415af1d78b58c40, "100000000000000000000"},
		{0x4415af1d78b58c3f, "99999999999999980000"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%016x", tt.bits), func(t *testing.T) {
			t.Parallel()
			f := math.Float64frombits(tt.bits)
			// Feed the value in a different spelling from the expected one,
			// so the test exercises parsing as well as formatting.
			for _, in := range []string{
				strconv.FormatFloat(f, 'e', -1, 64),
				strconv.FormatFloat(f, 'E', 20, 64),
				tt.want,
			} {
				got, err := canonjson.Canonicalize([]byte(in))
				if err != nil {
					t.Fatalf("Canonicalize(%s): %v", in, err)
				}
				if string(got) != tt.want {
					t.Errorf("Canonicalize(%s) = %s, want %s", in, got, tt.want)
				}
			}
		})
	}
}

// The appendix's NaN and Infinity rows have no JSON input form; the nearest
// inputs are overflowing literals, which must fail rather than emit anything.
func TestRFC8785AppendixBNonFinite(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"1e999", "-1e999", "[179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792]"} {
		if _, err := canonjson.Canonicalize([]byte(in)); !errors.Is(err, canonjson.ErrNumberRange) {
			t.Errorf("Canonicalize(%.20s…) error = %v, want ErrNumberRange", in, err)
		}
	}
}

// RFC 8785 §3.2.3: members sort by UTF-16 code units, so U+1F600 (D83D DE00)
// sorts before U+FB33, unlike in code point or UTF-8 order.
func TestRFC8785Sorting(t *testing.T) {
	t.Parallel()
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","😀":"Emoji: Grinning Face","דּ":"Hebrew Letter Dalet With Dagesh"}`
	got, err := canonjson.Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// RFC 8785 §3.2.2 input and the exact UTF-8 bytes §3.2.4 gives for it.
func TestRFC8785Example(t *testing.T) {
	t.Parallel()
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	wantHex := "7b226c69746572616c73223a5b6e756c6c2c747275652c66616c73655d2c" +
		"226e756d62657273223a5b3333333333333333332e333333333333332c31652b" +
		"33302c342e352c302e3030322c31652d32375d2c22737472696e67223a22e282" +
		"ac245c75303030665c6e4127425c225c5c5c5c5c222f227d"
	want, err := hex.DecodeString(wantHex)
	if err != nil {
		t.Fatal(err)
	}
	got, err := canonjson.Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// esReference formats f the way ECMAScript does, built independently of the
// package: positional notation exactly when 1e-6 <= |f| < 1e21, otherwise
// exponent notation with no padding in the exponent.
func esReference(f float64) string {
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[:1]
	exp = strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + exp
}

func TestNumbersAgainstReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(8785, 1))
	check := func(f float64) {
		t.Helper()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return
		}
		in := strconv.FormatFloat(f, 'g', -1, 64)
		got, err := canonjson.Canonicalize([]byte(in))
		if err != nil {
			t.Fatalf("Canonicalize(%s): %v", in, err)
		}
		if want := esReference(f); string(got) != want {
			t.Fatalf("Canonicalize(%s) = %s, want %s", in, got, want)
		}
		back, err := strconv.ParseFloat(string(got), 64)
		if err != nil || back != f {
			t.Fatalf("%s reads back as %v (%v), want %v", got, back, err, f)
		}
	}
	for range 200_000 {
		check(math.Float64frombits(rng.Uint64())) // every exponent equally
	}
	for range 50_000 {
		check(float64(rng.Int64N(1<<54) - 1<<53)) // integers
	}
	for range 50_000 {
		check(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(50)-25))) // human-scale
	}
	for e := -330; e <= 310; e++ { // every decade boundary and its neighbours
		f := math.Pow(10, float64(e))
		check(f)
		check(math.Nextafter(f, 0))
		check(math.Nextafter(f, math.Inf(1)))
		check(-f)
	}
}

func TestDigest(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte(`{"a":[1,"x"],"b":true}`))
	want := "sha256:" + hex.EncodeToString(sum[:])
	equivalent := []string{
		`{"a":[1,"x"],"b":true}`,
		`{"b":true,"a":[1,"x"]}`,
		"{ \"b\" : true,\n  \"a\" : [ 1.0, \"\\u0078\" ] }",
		`{"a":[1e0,"x"],"b":true}`,
		`{"\u0062":true,"a":[10E-1,"x"]}`,
	}
	for _, in := range equivalent {
		got, err := canonjson.Digest([]byte(in))
		if err != nil {
			t.Fatalf("Digest(%q): %v", in, err)
		}
		if got != want {
			t.Errorf("Digest(%q) = %s, want %s", in, got, want)
		}
	}
	different := []string{`{"a":[1,"x"],"b":false}`, `{"a":["x",1],"b":true}`, `{"a":[1,"X"],"b":true}`}
	for _, in := range different {
		got, err := canonjson.Digest([]byte(in))
		if err != nil {
			t.Fatalf("Digest(%q): %v", in, err)
		}
		if got == want {
			t.Errorf("Digest(%q) equals the digest of a different value", in)
		}
		if !strings.HasPrefix(got, canonjson.DigestPrefix) || len(got) != len(canonjson.DigestPrefix)+64 || strings.ToLower(got) != got {
			t.Errorf("Digest(%q) = %q, want sha256: and 64 lowercase hex digits", in, got)
		}
	}
	if got, err := canonjson.Digest([]byte(`{"a":1,"a":1}`)); err == nil || got != "" {
		t.Errorf("Digest of duplicate keys = %q, %v; want empty and an error", got, err)
	}
}

// Canonicalize and Digest reuse internal buffers; outputs must stay intact
// after later calls, including concurrent ones.
func TestOutputsIndependent(t *testing.T) {
	t.Parallel()
	first, err := canonjson.Canonicalize([]byte(`{"k":"first","a":[1,2,3]}`))
	if err != nil {
		t.Fatal(err)
	}
	snapshot := string(first)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 200 {
				in := fmt.Sprintf(`{"z":%d,"y":"%s","x":{"b":%d,"a":[%d]}}`, i, strings.Repeat("q", j), j, i*j)
				out, err := canonjson.Canonicalize([]byte(in))
				if err != nil {
					t.Error(err)
					return
				}
				want := fmt.Sprintf(`{"x":{"a":[%d],"b":%d},"y":"%s","z":%d}`, i*j, j, strings.Repeat("q", j), i)
				if string(out) != want {
					t.Errorf("got %s, want %s", out, want)
					return
				}
				d, err := canonjson.Digest([]byte(in))
				if err != nil {
					t.Error(err)
					return
				}
				sum := sha256.Sum256([]byte(want))
				if d != "sha256:"+hex.EncodeToString(sum[:]) {
					t.Errorf("Digest(%s) = %s, inconsistent with Canonicalize", in, d)
					return
				}
			}
		})
	}
	wg.Wait()
	if string(first) != snapshot {
		t.Errorf("earlier output changed from %s to %s", snapshot, first)
	}
}

// TestMatchesEncodingJSON checks on a corpus of realistic documents that
// canonicalisation preserves the value encoding/json reads. The corpus (the
// fuzz seeds) also holds inputs Canonicalize must refuse, which have no
// value to compare: each is listed with the error it must get, and any
// other input that fails fails the test.
func TestMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	refused := map[string]error{
		``:                   canonjson.ErrSyntax,
		`[1,]`:               canonjson.ErrSyntax,
		`{"a":1}x`:           canonjson.ErrSyntax,
		`1e400`:              canonjson.ErrNumberRange,
		`"\ud800"`:           canonjson.ErrInvalidUnicode,
		"\"\xff\"":           canonjson.ErrInvalidUnicode,
		`{"a":1,"a":2}`:      canonjson.ErrDuplicateKey,
		`{"a":1,"\u0061":2}`: canonjson.ErrDuplicateKey,
	}
	compared, seen := 0, 0
	for _, in := range fuzzSeeds {
		got, err := canonjson.Canonicalize([]byte(in))
		if want, ok := refused[in]; ok {
			seen++
			if !errors.Is(err, want) {
				t.Errorf("Canonicalize(%q) = %q, %v; want the error %v", in, got, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("Canonicalize(%q): %v", in, err)
			continue
		}
		assertSameValue(t, []byte(in), got)
		compared++
	}
	// Every refusal listed is in the corpus, and most of the corpus is
	// compared: the list cannot grow to hide the comparison.
	if seen != len(refused) {
		t.Errorf("%d of the %d refused inputs listed are in the corpus", seen, len(refused))
	}
	if compared != len(fuzzSeeds)-len(refused) || compared < len(refused) {
		t.Errorf("compared %d of %d inputs (%d refused)", compared, len(fuzzSeeds), len(refused))
	}
}

func assertSameValue(t *testing.T, in, out []byte) {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatalf("encoding/json rejects input %q that Canonicalize accepted: %v", in, err)
	}
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatalf("encoding/json rejects output %q: %v", out, err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("value changed:\n in  %q → %#v\n out %q → %#v", in, a, out, b)
	}
}

func ExampleCanonicalize() {
	out, err := canonjson.Canonicalize([]byte(`{ "path": "/tmp/x", "mode": 4.20e2, "recursive": false }`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	// Output: {"mode":420,"path":"/tmp/x","recursive":false}
}

func ExampleDigest() {
	a, _ := canonjson.Digest([]byte(`{"b":2,"a":1}`))
	b, _ := canonjson.Digest([]byte(`{ "a": 1.0, "b": 2e0 }`))
	fmt.Println(a == b)
	_, err := canonjson.Digest([]byte(`{"a":1,"a":2}`))
	fmt.Println(errors.Is(err, canonjson.ErrDuplicateKey))
	// Output:
	// true
	// true
}
