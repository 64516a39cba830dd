package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/server/auth"
)

// credentialRecheck is how often the server asks the authenticator again
// whether the credentials that opened its streams still stand: a
// revocation ends their streams within this, and docs/api.md asks for a
// second.
const credentialRecheck = 500 * time.Millisecond

// A round of rechecks asks the authenticator about at most credentialAsks
// tokens at once, all within credentialAskTimeout: an authenticator that
// calls an identity provider is asked a bounded number of questions, and
// one that hangs delays the next round rather than piling up calls.
const (
	credentialAsks       = 8
	credentialAskTimeout = 10 * time.Second
)

// guardStream returns the context a stream of r runs under: it ends when
// the request's does, when the credential that opened the stream expires
// (a JWT's exp), and within credentialRecheck of the credential being revoked (its
// token no longer authenticates, or stands for someone else). Nothing is
// sent after it ends (docs/api.md Part 3, "Grants, streams, secrets and what
// approvers read"). id is who the request authenticated as.
//
// A credential that tells its bounds (auth.CredentialAuthenticator) and
// cannot be withdrawn before it expires (not Revocable, with an ExpiresAt:
// a JWT) is bounded by its expiry alone. Any other (an API key, a token
// of an authenticator that tells no bounds) is rechecked by the server's
// credential guard (s.creds), once a round for all the streams it opened.
func (s *Server) guardStream(r *http.Request, id countersign.Identity) (context.Context, context.CancelFunc) {
	ctx, cancel := s.requestContext(r)
	token, err := auth.BearerToken(r)
	if err != nil {
		// The inbox's stream: its own session bounds it (web.Inbox).
		return ctx, cancel
	}
	cred, err := auth.AuthenticateCredential(ctx, s.auth, token)
	if err != nil {
		// Refused or undecidable a moment after it authenticated: the
		// stream does not start.
		cancel()
		return ctx, cancel
	}
	if !cred.ExpiresAt.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, cred.ExpiresAt)
		prev := cancel
		cancel = func() { stop(); prev() }
		if !cred.Revocable {
			return ctx, cancel
		}
	}
	remove := s.creds.Add(token, id, cancel)
	return ctx, func() { remove(); cancel() }
}

// recheckCredentials is a round of the server's credential guard (s.creds,
// internal/recheck): it asks the authenticator about each token once,
// however many streams it opened, and ends those streams of a token that
// is refused or now stands for someone else. An authenticator that cannot
// answer (an identity provider down) leaves the streams be until the next
// round: a refusal is an answer, an outage is not.
func (s *Server) recheckCredentials(tokens []string) {
	ctx, cancel := context.WithTimeout(s.base, credentialAskTimeout)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(credentialAsks, len(tokens)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(tokens); i = int(next.Add(1)) - 1 {
				s.recheckCredential(ctx, tokens[i])
			}
		})
	}
	wg.Wait()
}

// recheckCredential asks the authenticator about token once, for all the
// streams it opened.
func (s *Server) recheckCredential(ctx context.Context, token string) {
	now, err := s.auth.Authenticate(ctx, token)
	switch {
	case s.base.Err() != nil:
		// Shut down: the streams end with the server.
	case errors.Is(err, auth.ErrUnauthenticated):
		s.creds.End(token, nil)
	case err != nil:
		s.log.LogAttrs(ctx, slog.LevelWarn, "stream: check the credential", slog.Any("err", err))
	default:
		s.creds.End(token, func(opened countersign.Identity) bool {
			return now.Tenant != opened.Tenant || now.Actor != opened.Actor || now.KindOrHuman() != opened.KindOrHuman()
		})
	}
}
