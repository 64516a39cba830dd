package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/server/auth"
)

// credentialRecheck is how often a stream asks the authenticator again
// whether the credential that opened it still stands: a revocation ends the
// stream within this, and docs/api.md asks for a second.
const credentialRecheck = 500 * time.Millisecond

// guardStream returns the context a stream of r runs under: it ends when
// the request's does, when the credential that opened the stream expires
// (a JWT's exp), and within s.recheck of the credential being revoked (its
// token no longer authenticates, or stands for someone else). Nothing is
// sent after it ends (docs/api.md Part 3, "Grants, streams, secrets and what
// approvers read"). id is who the request authenticated as.
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
	}
	go s.watchCredential(ctx, cancel, token, id)
	return ctx, cancel
}

// watchCredential calls end once token no longer authenticates as id,
// asking every s.recheck until ctx ends. An authenticator that cannot
// answer (an identity provider down) leaves the stream be until the next
// check: a refusal is an answer, an outage is not.
func (s *Server) watchCredential(ctx context.Context, end context.CancelFunc, token string, id countersign.Identity) {
	t := time.NewTicker(s.recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := s.auth.Authenticate(ctx, token)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, auth.ErrUnauthenticated):
			end()
			return
		case err != nil:
			s.log.LogAttrs(ctx, slog.LevelWarn, "stream: check the credential", slog.Any("err", err))
		case now.Tenant != id.Tenant || now.Actor != id.Actor || now.KindOrHuman() != id.KindOrHuman():
			end()
			return
		}
	}
}
