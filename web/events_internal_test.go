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
			in.recheck = time.Millisecond
			hs := httptest.NewServer(in.Handler())
			defer hs.Close()

			token, _, err := e.StartSession(context.Background(), &countersign.StartSessionParams{
				Identity: countersign.Identity{Tenant: "acme", Actor: "bob"}, Credential: "key_bob", Revocable: true, TTL: 30 * time.Minute,
			})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodGet, hs.URL+"/events", nil)
			req.AddCookie(&http.Cookie{Name: sessionCookie, Value: token})
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); resp.StatusCode != http.StatusOK || !strings.HasPrefix(line, "retry:") {
				t.Fatalf("stream: %d, first line %q, %v", resp.StatusCode, line, err)
			}
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
