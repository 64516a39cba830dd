package auth

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBearerToken(t *testing.T) {
	t.Parallel()
	maxToken := strings.Repeat("t", maxTokenBytes)
	tests := []struct {
		name    string
		headers []string // Authorization values
		want    string   // "": want ErrUnauthenticated
	}{
		{"bearer", []string{"Bearer ck_dev_alice"}, "ck_dev_alice"},
		{"lower-case scheme", []string{"bearer abc"}, "abc"},
		{"upper-case scheme", []string{"BEARER abc"}, "abc"},
		{"several spaces", []string{"Bearer   abc"}, "abc"},
		{"JWT", []string{"Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"}, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"},
		{"b64token characters and padding", []string{"Bearer aZ09-._~+/=="}, "aZ09-._~+/=="},
		{"longest", []string{"Bearer " + maxToken}, maxToken},
		{"missing", nil, ""},
		{"empty", []string{""}, ""},
		{"scheme alone", []string{"Bearer"}, ""},
		{"scheme and space", []string{"Bearer "}, ""},
		{"other scheme", []string{"Basic YWxpY2U6cHc="}, ""},
		{"scheme without space", []string{"Bearerabc"}, ""},
		{"tab separator", []string{"Bearer\tabc"}, ""},
		{"two tokens", []string{"Bearer abc def"}, ""},
		{"trailing space", []string{"Bearer abc "}, ""},
		{"leading space", []string{" Bearer abc"}, ""},
		{"padding only", []string{"Bearer =="}, ""},
		{"padding inside", []string{"Bearer ab=c"}, ""},
		{"comma", []string{"Bearer abc,def"}, ""},
		{"quote", []string{`Bearer "abc"`}, ""},
		{"non-ASCII", []string{"Bearer abcé"}, ""},
		{"too long", []string{"Bearer " + maxToken + "t"}, ""},
		{"two headers", []string{"Bearer abc", "Bearer abc"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/v1/proposals", nil)
			for _, h := range tt.headers {
				r.Header.Add("Authorization", h)
			}
			got, err := BearerToken(r)
			if tt.want == "" {
				if got != "" || !errors.Is(err, ErrUnauthenticated) {
					t.Fatalf("BearerToken = %q, %v; want ErrUnauthenticated", got, err)
				}
				for _, h := range tt.headers {
					if _, tok, _ := strings.Cut(h, " "); len(tok) >= 3 && strings.Contains(err.Error(), tok) {
						t.Fatalf("error %q quotes the token", err)
					}
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("BearerToken = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
