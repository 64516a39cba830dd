package redact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/redact"
)

func TestURLs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"no url", "dial tcp 127.0.0.1:1: connect: connection refused", "dial tcp 127.0.0.1:1: connect: connection refused"},
		{"empty", "", ""},
		{"plain url kept", "https://hooks.example/in", "https://hooks.example/in"},
		{"port and path kept", "http://127.0.0.1:9300/n/x", "http://127.0.0.1:9300/n/x"},
		{"query values", "https://h/in?token=s3cr3t&team=ops", "https://h/in?token=REDACTED&team=REDACTED"},
		{"empty value stays empty", "https://h/in?token=&x", "https://h/in?token=&REDACTED"},
		{"bare token query", "https://h/in?s3cr3t", "https://h/in?REDACTED"},
		{"semicolon separator", "https://h/in?a=1;token=s3cr3t", "https://h/in?a=REDACTED;token=REDACTED"},
		{"empty query", "https://h/in?", "https://h/in?"},
		{"user and password", "https://user:pa55@h/in", "https://REDACTED@h/in"},
		{"user only", "https://t0ken@h/in", "https://REDACTED@h/in"},
		{"@ in password", "https://u:p@ss@h/", "https://REDACTED@h/"},
		{"@ in the path is no userinfo", "https://h/a@b", "https://h/a@b"},
		{"@ in the query", "https://h/?a=x@y", "https://h/?a=REDACTED"},
		{"userinfo before a query", "https://u:p@h?t=s", "https://REDACTED@h?t=REDACTED"},
		{"fragment", "https://h/cb#access_token=s3cr3t", "https://h/cb#REDACTED"},
		{"fragment before ?", "https://h/p#f?t=s3cr3t", "https://h/p#REDACTED"},
		{"query then fragment", "https://h/p?t=s3cr3t#f", "https://h/p?t=REDACTED#REDACTED"},
		{"ipv6 host kept", "http://[::1]:8080/x?k=v", "http://[::1]:8080/x?k=REDACTED"},
		{"postgres dsn", "postgres://app:pw@db:5432/cs?sslmode=require", "postgres://REDACTED@db:5432/cs?sslmode=REDACTED"},
		{"net/http error", `Post "https://h/in?token=s3cr3t": dial tcp: lookup h: no such host`,
			`Post "https://h/in?token=REDACTED": dial tcp: lookup h: no such host`},
		{"two urls", "from https://a/?k=1 to https://u@b/ ok", "from https://a/?k=REDACTED to https://REDACTED@b/ ok"},
		{"url in a query", "https://h/?next=https://u:p@x/?t=s", "https://h/?next=REDACTED"},
		{"escaped quote inside", `"https://h/?a=x\"&t=s3cr3t" done`, `"https://h/?a=REDACTED&t=REDACTED" done`},
		{"json html escapes", `{"err":"https://h/?a=1\u0026t=s3cr3t"}`, `{"err":"https://h/?a=REDACTED\u0026t=REDACTED"}`},
		{"json escaped slashes", `"https:\/\/u:p@h\/x?t=s3cr3t"`, `"https:\/\/REDACTED@h\/x?t=REDACTED"`},
		{"ends at angle bracket", "<https://h/?t=s3cr3t>", "<https://h/?t=REDACTED>"},
		{"ends at backquote", "`https://h/?t=s3cr3t` x", "`https://h/?t=REDACTED` x"},
		{"ends at newline", "https://h/?t=s3cr3t\nnext line", "https://h/?t=REDACTED\nnext line"},
		{"single quotes are inside", "'https://h/?t=s3cr3t' x", "'https://h/?t=REDACTED x"},
		{"no scheme name", "://u:p@h/?t=s", "://REDACTED@h/?t=REDACTED"},
		{"scheme at the end", "see https://", "see https://"},
		{"trailing backslash", `https://h/?t=s\`, `https://h/?t=REDACTED`},
		{"non-ascii stays inside", "https://h/?t=sé\u00a0cret x", "https://h/?t=REDACTED x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := redact.URLs(tt.in); got != tt.want {
				t.Errorf("URLs(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if got := redact.URLs(redact.URLs(tt.in)); got != redact.URLs(tt.in) {
				t.Errorf("URLs is not idempotent on %q: %q", tt.in, got)
			}
		})
	}
}

func TestURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://h/in?token=s3cr3t":  "https://h/in?token=REDACTED",
		"https://h/in?t=a b&u=c":     "https://h/in?t=REDACTED&u=REDACTED", // read whole: the space ends nothing
		"https://u:p@h/x":            "https://REDACTED@h/x",
		"u:p@h/x?k=v":                "REDACTED@h/x?k=REDACTED",
		"https://h/x":                "https://h/x",
		`https://h/?t="quoted" more`: "https://h/?t=REDACTED",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNetHTTPErrorsAreRedacted: the errors net/http really returns for a
// request whose URL carries a token, as they read, are redacted.
func TestNetHTTPErrorsAreRedacted(t *testing.T) {
	t.Parallel()
	const secret = "tok3n-in-the-url"
	for _, raw := range []string{
		"http://127.0.0.1:1/in?token=" + secret,            // refused
		"http://" + secret + ":pw@127.0.0.1:1/in",          // userinfo (net/http hides only the password)
		"http://" + secret + "@127.0.0.1:1/in",             // a user that is a token
		"http://127.0.0.1:1/in?a=b&token=" + secret + "#x", // a later value, a fragment
	} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = http.DefaultClient.Do(req)
		if err == nil || !strings.Contains(err.Error(), secret) {
			t.Fatalf("%s: net/http's error %v: the test needs one that repeats the URL", raw, err)
		}
		wrapped := fmt.Errorf("notify: %w", redact.Error(err))
		if got := wrapped.Error(); strings.Contains(got, secret) {
			t.Errorf("redacted error still holds the secret: %s", got)
		}
		var ue *url.Error
		if !errors.As(wrapped, &ue) {
			t.Errorf("errors.As no longer finds the *url.Error through redact.Error")
		}
	}
	if redact.Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"https://hooks.example/in?token=abc&x=1",
		"http://127.0.0.1:9300/n",
		"http://[::1]:8080/x",
		"https://h/a%20b?q=%2F",
		"https://h/p;v=1?a=(b)&c=!$'*+,",
	} {
		if err := redact.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q): %v", ok, err)
		}
	}
	for in, want := range map[string]string{
		"https://h/?t=a b":    `byte 15 is ' '`,
		"https://h/?t=\"x\"":  `byte 14 is '"'`,
		"https://h/?t=a\\b":   `byte 15 is '\\'`,
		"https://h/?t=\t":     `byte 14 is '\t'`,
		"https://h/?t=é":      "byte 14 is a non-ASCII byte",
		"https://h/?t=<x>":    `byte 14 is '<'`,
		"https://h/?t=%":      "the % at byte 14",
		"https://h/?t=%4":     "the % at byte 14",
		"https://h/?t=%zz":    "the % at byte 14",
		"https://h/?t=`x`":    "byte 14 is '`'",
		"https://h/{x}":       "byte 11 is '{'",
		"https://h/?t=a|b":    "byte 15 is '|'",
		"https://h/?t=a^b":    "byte 15 is '^'",
		"https://h/?t=\x7fab": `byte 14 is '\x7f'`,
	} {
		err := redact.CheckURL(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckURL(%q) = %v, want an error holding %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), in) {
			t.Errorf("CheckURL(%q)'s error repeats the URL: %v", in, err)
		}
	}
}

// FuzzURLs builds a URL from its parts and checks that, however a text
// quotes it (raw, %q, JSON, a *url.Error, slog's text and JSON handlers),
// URLs leaves none of its secrets: the userinfo, the query's values and the
// fragment. It also never panics, never touches text without "://", and is
// idempotent.
func FuzzURLs(f *testing.F) {
	f.Add("https", "alice:s3cr3tpassw0rd", "hooks.example:8443", "/in/x", "token=abcdefgh12345678&team=ops", "frag", "Post %q: EOF")
	f.Add("http", "", "127.0.0.1:9300", "/n", "abcdefgh12345678", "", "%s")
	f.Add("postgres", "app", "db", "/cs", "sslmode=require;pw=zzzzzzzz99", "", `{"error":%q}`)
	f.Fuzz(func(t *testing.T, scheme, userinfo, host, path, query, fragment, frame string) {
		raw := scheme + "://"
		if userinfo != "" {
			raw += userinfo + "@"
		}
		raw += host + path
		if query != "" {
			raw += "?" + query
		}
		if fragment != "" {
			raw += "#" + fragment
		}
		// Any text: no panic, idempotent, unchanged without "://".
		for _, s := range []string{raw, frame, userinfo + query} {
			once := redact.URLs(s)
			if redact.URLs(once) != once {
				t.Fatalf("URLs(URLs(%q)) = %q, not %q", s, redact.URLs(once), once)
			}
			if !strings.Contains(s, "://") && !strings.Contains(s, `:\/\/`) && once != s {
				t.Fatalf("URLs(%q) changed text without a URL: %q", s, once)
			}
		}
		_ = redact.URL(raw)

		// The promise holds for URLs CheckURL accepts, which net/url
		// reads as the parts they were built from.
		u, err := url.Parse(raw)
		if redact.CheckURL(raw) != nil || err != nil || u.Scheme == "" || u.Host != host || u.RawQuery != query || u.EscapedFragment() != fragment {
			return
		}
		if strings.ContainsAny(scheme+host+path, "?#@") || strings.Contains(frame, "://") || strings.Contains(frame, `:\/\/`) {
			return
		}
		var secrets []string
		if userinfo != "" {
			secrets = append(secrets, strings.Split(userinfo, ":")...)
		}
		keys := []string{}
		for part := range strings.FieldsFuncSeq(query, func(r rune) bool { return r == '&' || r == ';' }) {
			if k, v, ok := strings.Cut(part, "="); ok {
				keys = append(keys, k)
				secrets = append(secrets, v)
			} else {
				secrets = append(secrets, part)
			}
		}
		if fragment != "" {
			secrets = append(secrets, fragment)
		}
		// A secret is looked for where it is long, plain (so quoting does
		// not change how it reads) and not also in the text kept: the
		// scheme, host, path, keys, frame, the words around the URL.
		kept := strings.Join(append(keys, scheme, host, path, frame, redact.Mask, surrounding), " ")
		var check []string
		for _, s := range secrets {
			if len(s) >= 8 && isPlain(s) && !strings.Contains(kept, s) {
				check = append(check, s)
			}
		}
		if len(check) == 0 {
			return
		}
		if !strings.Contains(frame, "%") {
			frame += " %s"
		}
		var texts []string
		texts = append(texts, raw, fmt.Sprintf("%q", raw), strconv.Quote(raw), frameText(frame, raw))
		j, _ := json.Marshal(raw)
		texts = append(texts, string(j))
		ue := &url.Error{Op: "Post", URL: raw, Err: errors.New("dial tcp: connection refused")}
		noTime := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}
		texts = append(texts, ue.Error())
		for _, h := range []func(*bytes.Buffer) slog.Handler{
			func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, noTime) },
			func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, noTime) },
		} {
			var b bytes.Buffer
			slog.New(h(&b)).Warn("attempt failed", "err", ue, "url", raw)
			texts = append(texts, b.String())
		}
		for _, text := range texts {
			out := redact.URLs(text)
			for _, s := range check {
				if strings.Contains(out, s) {
					t.Fatalf("URLs left %q of %q in\n%s\n→ %s", s, raw, text, out)
				}
			}
		}
	})
}

// surrounding is the text the fuzz target puts around a URL.
const surrounding = "Post dial tcp: connection refused level=WARN msg=attempt failed err url"

// frameText puts raw in a fuzzed frame: a format with one verb, or else the
// frame followed by raw.
func frameText(frame, raw string) string {
	if strings.Count(frame, "%") == 1 && (strings.HasSuffix(frame, "%s") || strings.Contains(frame, "%s") || strings.Contains(frame, "%q") || strings.Contains(frame, "%v")) {
		return fmt.Sprintf(frame, raw)
	}
	return frame + " " + raw
}

// isPlain reports whether s is letters and digits only.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
