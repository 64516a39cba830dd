package web

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cstype"
)

// TestGrantState pins what the grants page says of each standing a grant's
// fields can give it, expiry included, which the end-to-end tests' policy
// does not set: revoked outranks expired, and a grant whose approved call
// has not succeeded is not live yet.
func TestGrantState(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	cases := []struct {
		name  string
		g     cstype.Grant
		state string
		note  string
	}{
		{"live", cstype.Grant{ActivatedAt: at(-time.Hour)}, "live", "Live until revoked"},
		{"live until", cstype.Grant{ActivatedAt: at(-time.Hour), ExpiresAt: at(time.Hour)}, "live", "Live until 2026-03-01 13:00:00 UTC"},
		{"inactive", cstype.Grant{}, "inactive", "Not live yet"},
		{"expired at now", cstype.Grant{ActivatedAt: at(-time.Hour), ExpiresAt: at(0)}, "expired", "Expired at 2026-03-01 12:00:00 UTC"},
		{"expired, never live", cstype.Grant{ExpiresAt: at(-time.Minute)}, "expired", "Expired"},
		{"revoked", cstype.Grant{ActivatedAt: at(-time.Hour), RevokedAt: at(-time.Minute), RevokedBy: "bob"}, "revoked", "Revoked by bob at 2026-03-01 11:59:00 UTC"},
		{"revoked and expired", cstype.Grant{ActivatedAt: at(-time.Hour), ExpiresAt: at(-time.Minute), RevokedAt: at(-2 * time.Minute)}, "revoked", "Revoked at"},
	}
	for _, c := range cases {
		state, note := grantState(&c.g, now)
		if state != c.state || !strings.HasPrefix(note, c.note) {
			t.Errorf("%s: %q, %q; want %q, a note starting %q", c.name, state, note, c.state, c.note)
		}
		if live := c.g.Live(now); live != (state == "live") {
			t.Errorf("%s: state %q, but the grant's Live says %v", c.name, state, live)
		}
	}
}
