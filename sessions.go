package countersign

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/countersign/countersign/store"
)

// Session is one signed-in browser of an inbox, as the engine keeps it: in
// the store, so that it holds across restarts and processes. Nothing it
// holds is what the browser presents.
type Session struct {
	Identity Identity
	// CredentialSHA256 is the SHA-256 (lowercase hex) of the API key or
	// token the user signed in with, so that the inbox can check on every
	// request that the credential still stands for Identity.
	CredentialSHA256 string
	// Revocable: the credential can be withdrawn before it expires (an API
	// key removed from the configuration), so the inbox looks it up again
	// by CredentialSHA256 on every request.
	Revocable bool
	// CSRF is the token every form of the session must carry.
	CSRF      string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// StartSessionParams describes the session to start.
type StartSessionParams struct {
	// Identity is who signed in. Tenant and Actor are required.
	Identity Identity
	// Credential is the API key or token the user signed in with. The
	// engine keeps only its SHA-256.
	Credential string
	// Revocable: the credential can be withdrawn before it expires and
	// looked up again by its SHA-256 (an API key).
	Revocable bool
	// TTL is the session's lifetime from now. Required.
	TTL time.Duration
	// NotAfter, when set, ends the session sooner: a JWT's exp, so that a
	// session never outlives the token it was opened with.
	NotAfter time.Time
}

// maxSessionToken bounds a presented session token: StartSession makes
// 43-character ones.
const maxSessionToken = 128

// startSessionSweep bounds the expired sessions one StartSession removes.
const startSessionSweep = 100

// StartSession stores a new session and returns the token for the browser's
// cookie. The session lasts TTL, or until NotAfter when that is sooner; a
// NotAfter already past is ErrInvalidCall.
//
// It then removes up to 100 sessions that have expired (of anyone: they
// are dead, and nobody's business), so that the sessions table stays tidy
// where no worker runs, at a cost bounded per sign-in. A failure there is
// logged, not returned: the new session stands.
func (e *Engine) StartSession(ctx context.Context, params *StartSessionParams) (string, *Session, error) {
	id := params.Identity
	// The inbox is where people decide: an agent credential never signs in.
	if err := mayAct(id, ActSignIn); err != nil {
		return "", nil, err
	}
	switch {
	case id.Tenant == "" || id.Actor == "":
		return "", nil, fmt.Errorf("start session: %w: identity without tenant or actor", ErrInvalidCall)
	case params.Credential == "":
		return "", nil, fmt.Errorf("start session: %w: credential required", ErrInvalidCall)
	case params.TTL <= 0:
		return "", nil, fmt.Errorf("start session: %w: TTL %v must be positive", ErrInvalidCall, params.TTL)
	}
	// Microseconds, as every store keeps them: the session returned here
	// is the one later lookups find.
	now := e.clock().Truncate(time.Microsecond)
	expires := now.Add(params.TTL)
	if !params.NotAfter.IsZero() && params.NotAfter.Before(expires) {
		expires = params.NotAfter.UTC().Truncate(time.Microsecond)
	}
	if !expires.After(now) {
		return "", nil, fmt.Errorf("start session: %w: the credential expired at %v", ErrInvalidCall, expires)
	}
	token := newSessionToken()
	rec := &store.Session{
		ID: sessionDigest(token), Tenant: id.Tenant, Actor: id.Actor, Roles: id.Roles,
		CredentialSHA256: CredentialSHA256(params.Credential), Revocable: params.Revocable, CSRF: newSessionToken(),
		CreatedAt: now, ExpiresAt: expires,
	}
	if err := e.store.CreateSession(ctx, &store.CreateSessionParams{Session: rec}); err != nil {
		return "", nil, fmt.Errorf("start session: %w", err)
	}
	// Signing in is rare (the inbox rate-limits it), so a batch here costs
	// little; the worker's SessionCleanup removes the rest.
	if _, err := e.removeSessionsBatch(ctx, e.sessionSweep); err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "start session: remove expired sessions", slog.Any("err", err))
	}
	return token, sessionFrom(rec), nil
}

// Session returns the live session a browser's token opens. A token that
// opens none, or opens one that has expired by the engine's clock, is
// ErrNotFound.
func (e *Engine) Session(ctx context.Context, token string) (*Session, error) {
	id, ok := sessionID(token)
	if !ok {
		return nil, fmt.Errorf("session: %w", ErrNotFound)
	}
	rec, err := e.store.GetSession(ctx, &store.GetSessionParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	// Expired sessions stay stored until a sweep: a lookup stays a read.
	if !e.clock().Before(rec.ExpiresAt) {
		return nil, fmt.Errorf("session: expired: %w", ErrNotFound)
	}
	return sessionFrom(rec), nil
}

// Sessions returns the live sessions among tokens, by token: a token that
// opens none, or one that has expired by the engine's clock, is left out,
// as Session would answer ErrNotFound. It reads the store once for every
// store.MaxGetSessions distinct tokens: the inbox asks it, twice a
// second, about every session whose event stream is open.
func (e *Engine) Sessions(ctx context.Context, tokens []string) (map[string]*Session, error) {
	byDigest := make(map[string]string, len(tokens))
	ids := make([]string, 0, len(tokens))
	for _, token := range tokens {
		id, ok := sessionID(token)
		if _, dup := byDigest[id]; ok && !dup {
			byDigest[id] = token
			ids = append(ids, id)
		}
	}
	live := make(map[string]*Session, len(ids))
	now := e.clock()
	for chunk := range slices.Chunk(ids, store.MaxGetSessions) {
		recs, err := e.store.GetSessions(ctx, &store.GetSessionsParams{IDs: chunk})
		if err != nil {
			return nil, fmt.Errorf("sessions: %w", err)
		}
		for _, rec := range recs {
			token, ok := byDigest[rec.ID]
			if ok && now.Before(rec.ExpiresAt) {
				live[token] = sessionFrom(rec)
			}
		}
	}
	return live, nil
}

// EndSession ends the session a token opens, in every process. Ending one
// that does not exist is not an error.
func (e *Engine) EndSession(ctx context.Context, token string) error {
	id, ok := sessionID(token)
	if !ok {
		return nil
	}
	if err := e.store.DeleteSession(ctx, &store.DeleteSessionParams{ID: id}); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// CredentialSHA256 is the digest a Session keeps of a credential: SHA-256,
// lowercase hex.
func CredentialSHA256(credential string) string {
	d := sha256.Sum256([]byte(credential))
	return hex.EncodeToString(d[:])
}

// sessionID is the store's id of a presented session token; ok is false
// for a token no session can have (empty, or longer than StartSession
// makes).
func sessionID(token string) (id string, ok bool) {
	if token == "" || len(token) > maxSessionToken {
		return "", false
	}
	return sessionDigest(token), true
}

// sessionDigest is the store's id of a session token.
func sessionDigest(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

// newSessionToken returns 32 random bytes, base64url-encoded.
func newSessionToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

func sessionFrom(rec *store.Session) *Session {
	r := rec.Clone()
	return &Session{
		Identity:         Identity{Tenant: r.Tenant, Actor: r.Actor, Roles: r.Roles, Kind: KindHuman},
		CredentialSHA256: r.CredentialSHA256,
		Revocable:        r.Revocable,
		CSRF:             r.CSRF,
		CreatedAt:        r.CreatedAt,
		ExpiresAt:        r.ExpiresAt,
	}
}
