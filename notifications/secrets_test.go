package notifications_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/notifications"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/webhook"
)

// counter is a server that records the headers of each request it gets.
type counter struct {
	mu      sync.Mutex
	headers []http.Header
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.headers = append(c.headers, r.Header.Clone())
	c.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (c *counter) got() []http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]http.Header(nil), c.headers...)
}

// TestRedirectsAreNotFollowed: a receiver that answers with a redirect to
// another host gets a failed attempt; the other host gets nothing — no
// signature, no Idempotency-Key, no body — whatever the status, and even
// with a client of the caller's that follows redirects.
func TestRedirectsAreNotFollowed(t *testing.T) {
	for _, client := range []struct {
		name string
		c    *http.Client
	}{{"default client", nil}, {"client that follows redirects", &http.Client{}}} {
		for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			t.Run(fmt.Sprintf("%s/%d", client.name, status), func(t *testing.T) {
				elsewhere := &counter{}
				other := httptest.NewServer(elsewhere)
				defer other.Close()
				// Another host, not only another port: localhost, where the
				// receiver is 127.0.0.1.
				_, port, _ := net.SplitHostPort(other.Listener.Addr().String())
				target := "http://localhost:" + port + "/steal"
				first := &counter{}
				receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					first.ServeHTTP(httptest.NewRecorder(), r)
					http.Redirect(w, r, target, status)
				}))
				defer receiver.Close()

				st := newStore(t, "mem")
				e := newEngine(t, st)
				d, err := notifications.New(notifications.Options{
					Engine: e, Render: server.RenderProposal, Client: client.c, Logger: slog.New(slog.DiscardHandler),
					Targets: []notifications.Target{{URL: receiver.URL + "/in", Events: []cstype.EventType{cstype.EventCreated},
						Secret: secret, MaxAttempts: 1}},
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				propose(t, e, "call_1")
				n := settle(t, st, d)
				if n.Status != cstype.NotificationFailed || !strings.Contains(n.LastError, "redirects are not followed") {
					t.Errorf("notification %+v; want failed, saying the redirect was not followed", n)
				}
				if got := first.got(); len(got) != 1 || got[0].Get(webhook.SignatureHeader) == "" {
					t.Errorf("the receiver got %d signed requests, want 1", len(got))
				}
				if got := elsewhere.got(); len(got) != 0 {
					t.Errorf("the host the redirect named got %d requests, the first with headers %v", len(got), got[0])
				}
			})
		}
	}
	// The caller's client keeps its own redirect policy for its other uses.
	c := &http.Client{}
	e := newEngine(t, newStore(t, "mem"))
	if _, err := notifications.New(notifications.Options{Engine: e, Render: server.RenderProposal, Client: c}); err != nil {
		t.Fatal(err)
	}
	if c.CheckRedirect != nil {
		t.Error("New changed the caller's client")
	}
}

// TestURLTokensStayOutOfErrorsAndLogs: a receiver URL's query token is in
// neither the notification's last_error nor the log, whether the receiver
// refuses the connection, answers 503 or redirects; the error still says
// what went wrong.
func TestURLTokensStayOutOfErrorsAndLogs(t *testing.T) {
	const token = "qs-t0ken-9f8e7d6c"
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close() // nothing listens there now: connections are refused
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.example/?token="+token, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()

	for _, c := range []struct {
		name, url, says string
	}{
		{"refused", "http://" + refusedAddr + "/in?team=ops&token=" + token, "connection refused"},
		{"503", failing.URL + "/in?token=" + token, "503"},
		{"redirect", redirecting.URL + "/in?token=" + token + "#" + token, "307"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			st := newStore(t, "mem")
			e := newEngine(t, st)
			d, err := notifications.New(notifications.Options{
				Engine: e, Render: server.RenderProposal, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
				Targets: []notifications.Target{{URL: c.url, Events: []cstype.EventType{cstype.EventCreated}, Secret: secret, MaxAttempts: 1}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			propose(t, e, "call_1")
			n := settle(t, st, d)
			if n.Status != cstype.NotificationFailed || !strings.Contains(n.LastError, c.says) {
				t.Fatalf("notification %+v; want failed, saying %q", n, c.says)
			}
			if strings.Contains(n.LastError, token) {
				t.Errorf("last_error holds the URL's token: %s", n.LastError)
			}
			if !strings.Contains(logs.String(), "attempt failed") {
				t.Fatalf("no failure logged:\n%s", logs.String())
			}
			if strings.Contains(logs.String(), token) {
				t.Errorf("the log holds the URL's token:\n%s", logs.String())
			}
		})
	}
}

// TestTargetURLsAreChecked: New refuses a URL with userinfo or with a
// character that would end it early in a text, and its errors never repeat
// the URL's secrets.
func TestTargetURLsAreChecked(t *testing.T) {
	e := newEngine(t, newStore(t, "mem"))
	for _, u := range []string{
		"https://user:s3cr3t@hooks.example/in",
		"https://hooks.example/in?token=s3cr3t&x=a b",
		"https://hooks.example/in?token=s3cr3t&x=\"",
		"ftp://hooks.example/in?token=s3cr3t",
	} {
		_, err := notifications.New(notifications.Options{Engine: e, Render: server.RenderProposal,
			Targets: []notifications.Target{{URL: u, Events: []cstype.EventType{cstype.EventCreated}}}})
		if err == nil {
			t.Errorf("New accepted %q", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("New's error repeats the secret: %v", err)
		}
	}
	_, err := notifications.New(notifications.Options{Engine: e, Render: server.RenderProposal,
		Targets: []notifications.Target{
			{URL: "https://hooks.example/in?token=s3cr3t", Events: []cstype.EventType{cstype.EventCreated}},
			{URL: "https://hooks.example/in?token=s3cr3t", Events: []cstype.EventType{cstype.EventCreated}},
		}})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a URL twice: %v", err)
	}
}
