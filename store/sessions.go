package store

import (
	"context"
	"slices"
	"time"
)

// Sessions stores the inbox's signed-in browsers, so that a session
// survives a restart and holds in every process on the same store.
//
// Expiry is the caller's to judge: GetSession returns a session whatever its
// ExpiresAt, and DeleteExpiredSessions is given the time to judge by.
type Sessions interface {
	// CreateSession stores a new session. An ID already stored is
	// ErrInvalidParams.
	CreateSession(ctx context.Context, params *CreateSessionParams) error

	// GetSession returns a session by ID, or ErrNotFound.
	GetSession(ctx context.Context, params *GetSessionParams) (*Session, error)

	// GetSessions returns the sessions stored among params.IDs, in no
	// order, each once; an ID that names none is left out (the inbox asks
	// which of its open streams' sessions still stand, in one read). At
	// most MaxGetSessions IDs, or ErrInvalidParams.
	GetSessions(ctx context.Context, params *GetSessionsParams) ([]*Session, error)

	// DeleteSession removes a session. Removing one that is not stored is
	// not an error: signing out twice is signing out.
	DeleteSession(ctx context.Context, params *DeleteSessionParams) error

	// DeleteExpiredSessions removes up to Limit sessions whose ExpiresAt is
	// not after Before, and returns how many it removed.
	DeleteExpiredSessions(ctx context.Context, params *DeleteExpiredSessionsParams) (int, error)
}

// Session is one signed-in browser. The store holds only digests of what a
// browser or a user presents: ID is the SHA-256 of the session cookie, and
// CredentialSHA256 that of the API key or token pasted at sign-in (which is
// looked up again on every request, so that a session ends with its
// credential). Both are lowercase hex.
type Session struct {
	ID               string
	Tenant           string
	Actor            string
	Roles            []string
	CredentialSHA256 string
	// Revocable: the credential can be withdrawn before it expires (an API
	// key removed from the configuration), so whoever uses the session
	// looks it up again by CredentialSHA256 each time. A credential that
	// cannot be looked up (a JWT) bounds ExpiresAt instead.
	Revocable bool
	// CSRF is the token every form of the session carries.
	CSRF      string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Clone returns a deep copy.
func (s *Session) Clone() *Session {
	c := *s
	c.Roles = slices.Clone(s.Roles)
	return &c
}

// CreateSessionParams carries a fully formed session; the driver stores it
// as given, times included.
type CreateSessionParams struct {
	Session *Session
}

// GetSessionParams names one session.
type GetSessionParams struct {
	ID string
}

// MaxGetSessions bounds the IDs of one GetSessions.
const MaxGetSessions = 1000

// GetSessionsParams names sessions; repeats are allowed.
type GetSessionsParams struct {
	IDs []string
}

// ValidateGetSessions checks GetSessions' bound.
func ValidateGetSessions(p *GetSessionsParams) error {
	if p == nil {
		return invalidParams("get sessions: params required")
	}
	if len(p.IDs) > MaxGetSessions {
		return invalidParams("get sessions: %d ids, at most %d", len(p.IDs), MaxGetSessions)
	}
	return nil
}

// DeleteSessionParams names one session.
type DeleteSessionParams struct {
	ID string
}

// DeleteExpiredSessionsParams bounds one sweep of expired sessions.
type DeleteExpiredSessionsParams struct {
	// Before: sessions whose ExpiresAt is not after it have expired.
	Before time.Time
	// Limit bounds the sessions one call removes; it must be positive.
	Limit int
}

// ValidateSession checks a session before it is stored, for every driver.
func ValidateSession(s *Session) error {
	switch {
	case s == nil:
		return invalidParams("session required")
	case !isSHA256Hex(s.ID):
		return invalidParams("session id must be a SHA-256 in lowercase hex")
	case !isSHA256Hex(s.CredentialSHA256):
		return invalidParams("session credential must be a SHA-256 in lowercase hex")
	case s.Tenant == "" || s.Actor == "":
		return invalidParams("session tenant and actor required")
	case s.CSRF == "":
		return invalidParams("session CSRF token required")
	case s.CreatedAt.IsZero() || s.ExpiresAt.IsZero():
		return invalidParams("session times required")
	case !s.ExpiresAt.After(s.CreatedAt):
		return invalidParams("session expires at %v, not after its creation at %v", s.ExpiresAt, s.CreatedAt)
	}
	return nil
}

// ValidateDeleteExpiredSessions checks a sweep's parameters.
func ValidateDeleteExpiredSessions(p *DeleteExpiredSessionsParams) error {
	if p.Limit <= 0 {
		return invalidParams("sweep limit %d: must be positive", p.Limit)
	}
	if p.Before.IsZero() {
		return invalidParams("sweep time required")
	}
	return nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
