package web

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/server/auth"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/storetest"
)

// switchableKey is bob's API key, until it is removed.
type switchableKey struct {
	keys    *auth.APIKeys
	removed atomic.Bool
}

func (k *switchableKey) Authenticate(ctx context.Context, token string) (countersign.Identity, error) {
	return k.keys.Authenticate(ctx, token)
}

func (k *switchableKey) LookupSHA256(ctx context.Context, digest string) (countersign.Identity, error) {
	if k.removed.Load() {
		return countersign.Identity{}, auth.ErrUnauthenticated
	}
	return k.keys.LookupSHA256(ctx, digest)
}

// TestEventStreamEndsWithSession opens the inbox's event stream and ends
// its session while it runs, in each way a session ends: the stream ends
// too, instead of going on showing the tenant's events to someone no longer
// signed in.
func TestEventStreamEndsWithSession(t *testing.T) {
	t.Parallel()
	for name, end := range map[string]func(e *countersign.Engine, clock *storetest.Clock, key *switchableKey, token string) error{
		"signed out": func(e *countersign.Engine, _ *storetest.Clock, _ *switchableKey, token string) error {
			return e.EndSession(context.Background(), token)
		},
		"key removed": func(_ *countersign.Engine, _ *storetest.Clock, key *switchableKey, _ string) error {
			key.removed.Store(true)
			return nil
		},
		"expired": func(_ *countersign.Engine, clock *storetest.Clock, _ *switchableKey, _ string) error {
			clock.Advance(time.Hour)
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewClock(time.Now())
			quiet := slog.New(slog.DiscardHandler)
			e, err := countersign.New(countersign.Options{Store: memstore.New(&memstore.Options{Now: clock.Now}), Now: clock.Now, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			keys, err := auth.NewAPIKeys([]auth.APIKey{{Key: "key_bob", Tenant: "acme", Actor: "bob"}})
			if err != nil {
				t.Fatal(err)
			}
			key := &switchableKey{keys: keys}
			api, err := server.New(server.Options{Engine: e, Auth: key, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			in, err := New(Options{Engine: e, Auth: key, API: api, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			in.streams.SetPeriod(time.Millisecond)
			hs := httptest.NewServer(in.Handler())
			t.Cleanup(hs.Close)

			token, _, err := e.StartSession(context.Background(), &countersign.StartSessionParams{
				Identity: countersign.Identity{Tenant: "acme", Actor: "bob"}, Credential: "key_bob", Revocable: true, TTL: 30 * time.Minute,
			})
			if err != nil {
				t.Fatal(err)
			}
			br := openEvents(t, hs.URL, token)
			if err := end(e, clock, key, token); err != nil {
				t.Fatal(err)
			}
			ended := make(chan error, 1)
			go func() { _, err := io.Copy(io.Discard, br); ended <- err }()
			select {
			case <-ended:
			case <-time.After(time.Minute): // a hang, not a measurement
				t.Fatal("the event stream outlived its session")
			}
		})
	}
}

// openEvents opens the inbox's event stream with a session's token and
// reads its first line; the stream closes with the test.
func openEvents(t *testing.T, url, token string) *bufio.Reader {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/events", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: token})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); resp.StatusCode != http.StatusOK || !strings.HasPrefix(line, "retry:") {
		t.Fatalf("stream: %d, first line %q, %v", resp.StatusCode, line, err)
	}
	return br
}

// sessionReads counts the store's session reads: one at a time
// (GetSession) and together (GetSessions, with the IDs of its last call).
type sessionReads struct {
	store.Store
	one, many atomic.Int64
	lastIDs   atomic.Int64
}

func (s *sessionReads) GetSession(ctx context.Context, p *store.GetSessionParams) (*store.Session, error) {
	s.one.Add(1)
	return s.Store.GetSession(ctx, p)
}

func (s *sessionReads) GetSessions(ctx context.Context, p *store.GetSessionsParams) ([]*store.Session, error) {
	s.many.Add(1)
	s.lastIDs.Store(int64(len(p.IDs)))
	return s.Store.GetSessions(ctx, p)
}

// TestEventStreamsShareTheSessionCheck: the inbox checks the sessions of
// all its open event streams with one store read a round, each session
// once however many streams it opened, and reads none per stream; a
// session that ends ends its streams and no other's.
func TestEventStreamsShareTheSessionCheck(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.DiscardHandler)
	st := &sessionReads{Store: memstore.New(nil)}
	e, err := countersign.New(countersign.Options{Store: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.NewAPIKeys([]auth.APIKey{{Key: "key_bob", Tenant: "acme", Actor: "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	api, err := server.New(server.Options{Engine: e, Auth: keys, Logger: quiet, MaxStreamsPerActor: 20})
	if err != nil {
		t.Fatal(err)
	}
	in, err := New(Options{Engine: e, Auth: keys, API: api, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	in.streams.SetPeriod(5 * time.Millisecond)
	hs := httptest.NewServer(in.Handler())
	t.Cleanup(hs.Close)

	// Five sessions, two streams each.
	type open struct {
		token string
		ended chan struct{}
	}
	var streams []open
	for range 5 {
		token, _, err := e.StartSession(context.Background(), &countersign.StartSessionParams{
			Identity: countersign.Identity{Tenant: "acme", Actor: "bob"}, Credential: "key_bob", Revocable: true, TTL: 30 * time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			br := openEvents(t, hs.URL, token)
			o := open{token: token, ended: make(chan struct{})}
			go func() { _, _ = io.Copy(io.Discard, br); close(o.ended) }()
			streams = append(streams, o)
		}
	}

	one, many := st.one.Load(), st.many.Load()
	deadline := time.Now().Add(time.Minute) // a hang, not a measurement
	for st.many.Load()-many < 10 {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 10 rounds in a minute")
		}
		time.Sleep(time.Millisecond)
	}
	if n := st.one.Load() - one; n != 0 {
		t.Fatalf("%d reads of one session while 10 streams were open: want none, the rounds read them together", n)
	}
	if n := st.lastIDs.Load(); n != 5 {
		t.Fatalf("a round read %d sessions, want the 5 that the 10 streams opened", n)
	}

	// The first session ends: its two streams end, the others go on.
	if err := e.EndSession(context.Background(), streams[0].token); err != nil {
		t.Fatal(err)
	}
	for _, o := range streams[:2] {
		select {
		case <-o.ended:
		case <-time.After(time.Minute):
			t.Fatal("a stream outlived its session")
		}
	}
	for n := st.many.Load(); st.many.Load()-n < 3; {
		if time.Now().After(deadline) {
			t.Fatal("the rounds stopped while 8 streams were open")
		}
		time.Sleep(time.Millisecond)
	}
	for i, o := range streams[2:] {
		select {
		case <-o.ended:
			t.Fatalf("stream %d ended with another session", i+2)
		default:
		}
	}
}
