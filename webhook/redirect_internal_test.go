package webhook

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// TestRedirectsToAnotherHostAreNotFollowed: a backend whose endpoints answer
// with a redirect to another host (localhost, where the backend is
// 127.0.0.1) never gets its signed requests forwarded there: not by the
// default client, and not by a caller's client that follows redirects.
// The redirect is the hook's answer: execute is uncertain (the backend that
// answered may have acted), prepare and reconcile fail.
func TestRedirectsToAnotherHostAreNotFollowed(t *testing.T) {
	t.Parallel()
	for _, client := range []struct {
		name string
		c    *http.Client
	}{{"default client", nil}, {"client that follows redirects", &http.Client{}}} {
		for _, status := range []int{http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			t.Run(client.name+"/"+http.StatusText(status), func(t *testing.T) {
				t.Parallel()
				var mu sync.Mutex
				var stolen []http.Header
				other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					stolen = append(stolen, r.Header.Clone())
					mu.Unlock()
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"preview":"p","receipt":"r","status":"applied"}`))
				}))
				defer other.Close()
				_, port, _ := net.SplitHostPort(other.Listener.Addr().String())
				backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, "http://localhost:"+port+r.URL.Path, status)
				}))
				defer backend.Close()
				ep := func(path string) *Endpoint { return &Endpoint{URL: backend.URL + path, Timeout: 2 * time.Second} }
				_, hooks, err := newCaller(Spec{Prepare: ep("/prepare"), Execute: ep("/execute"), Reconcile: ep("/reconcile")},
					Options{Secret: secret, Client: client.c})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				rec, err := hooks.Execute(ctx, executeRequest())
				if got := classify(rec, err); got != uncertain || !strings.Contains(err.Error(), "HTTP") {
					t.Errorf("execute answered with a redirect: %+v, %v (%s); want uncertain", rec, err, got)
				}
				if p, err := hooks.Prepare(ctx, &countersign.PrepareRequest{Identity: alice, Action: "payments.refund", Input: []byte(`{}`)}); err == nil {
					t.Errorf("prepare answered with a redirect: %+v", p)
				}
				if r, err := hooks.Reconcile(ctx, &countersign.ReconcileRequest{Identity: alice, Action: "payments.refund", OperationID: "op_1"}); err == nil {
					t.Errorf("reconcile answered with a redirect: %+v", r)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(stolen) != 0 {
					t.Errorf("the host a redirect named got %d requests, the first with %v", len(stolen), stolen[0])
				}
			})
		}
	}
}

// TestEndpointURLErrorsAreRedacted: NewAction's errors about an endpoint's
// URL never repeat a token its query or userinfo holds, and a URL with a
// character that would end it early in a text is refused.
func TestEndpointURLErrorsAreRedacted(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"ftp://h/x?token=s3cr3tvalue",
		"https://h/x?token=s3cr3tvalue#frag",
		"https://user:s3cr3tvalue@h/x",
		"https://h/x?token=s3cr3tvalue&n=a b",
		"https://h/x?token=s3cr3tvalue&n=\"q\"",
		"https://h/x?token=s3cr3tvalue&n=%zz",
		"http://[::1/x?token=s3cr3tvalue",
	} {
		_, _, err := newCaller(Spec{Execute: &Endpoint{URL: u}}, Options{Secret: secret})
		if err == nil {
			t.Errorf("newCaller accepted %q", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3tvalue") {
			t.Errorf("the error for %q repeats its token: %v", u, err)
		}
	}
}
