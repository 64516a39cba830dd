package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/server/auth"
)

const (
	sessionCookie = "countersign_session"
	loginCookie   = "countersign_login"
	// maxTokenBytes bounds a pasted token, as the API bounds bearer tokens.
	maxTokenBytes = 8 << 10
	// maxFormBytes bounds a posted form.
	maxFormBytes = 64 << 10
	// maxCookieBytes bounds a session cookie's value worth looking up; the
	// engine's tokens are 43 characters.
	maxCookieBytes = 100
)

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// sessionToken returns the session cookie r presents, if any.
func sessionToken(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil || len(c.Value) > maxCookieBytes {
		return ""
	}
	return c.Value
}

// session returns r's live session, or nil: its cookie opens a session the
// engine still holds, and the credential it was opened with still stands
// for the same identity. A session whose credential no longer does is
// ended, in every process.
func (in *Inbox) session(r *http.Request) (*countersign.Session, error) {
	if sess := sessionOf(r); sess != nil {
		return sess, nil
	}
	return in.sessionByToken(r.Context(), sessionToken(r))
}

// sessionByToken is session for a cookie's token.
func (in *Inbox) sessionByToken(ctx context.Context, token string) (*countersign.Session, error) {
	if token == "" {
		return nil, nil
	}
	sess, err := in.engine.Session(ctx, token)
	if errors.Is(err, countersign.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return in.standing(ctx, token, sess)
}

// standing returns sess, the live session token opens, if the credential
// it was opened with still stands; otherwise it ends the session, in every
// process, and returns nil.
func (in *Inbox) standing(ctx context.Context, token string, sess *countersign.Session) (*countersign.Session, error) {
	ok, err := in.credentialStands(ctx, sess)
	if err != nil {
		return nil, err
	}
	if !ok {
		if err := in.engine.EndSession(ctx, token); err != nil {
			in.log.LogAttrs(ctx, slog.LevelWarn, "inbox: end a session whose credential was withdrawn", slog.Any("err", err))
		}
		return nil, nil
	}
	return sess, nil
}

// credentialStands reports whether sess's credential still resolves to its
// identity. A credential that cannot be withdrawn (a JWT) stands until the
// session's expiry, which is capped at the credential's; an API key must
// still be configured, for the same identity.
func (in *Inbox) credentialStands(ctx context.Context, sess *countersign.Session) (bool, error) {
	if !sess.Revocable {
		return true, nil
	}
	kl, ok := in.auth.(auth.KeyLookup)
	if !ok {
		return false, nil // nothing can vouch for the key any more
	}
	id, err := kl.LookupSHA256(ctx, sess.CredentialSHA256)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return sameIdentity(id, sess.Identity), nil
}

func sameIdentity(a, b countersign.Identity) bool {
	ar, br := slices.Clone(a.Roles), slices.Clone(b.Roles)
	slices.Sort(ar)
	slices.Sort(br)
	return a.Tenant == b.Tenant && a.Actor == b.Actor && slices.Equal(ar, br)
}

type sessionKey struct{}

// sessionOf returns the session signedIn stored in r's context.
func sessionOf(r *http.Request) *countersign.Session {
	sess, _ := r.Context().Value(sessionKey{}).(*countersign.Session)
	return sess
}

// signedIn runs h for a signed-in browser. A page asked for without a
// session sends the browser to sign in and back; a POST is refused. Every
// POST must carry the session's CSRF token and come from this origin.
func (in *Inbox) signedIn(h pageFunc) pageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		sess, err := in.session(r)
		if err != nil {
			return err
		}
		if sess == nil {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(safeNext(r.URL.RequestURI())), http.StatusSeeOther)
				return nil
			}
			return errPage(http.StatusForbidden, "Signed out", "Your session has ended. Sign in again, then repeat what you were doing.")
		}
		if r.Method == http.MethodPost {
			if err := checkOrigin(r); err != nil {
				return err
			}
			if err := parseForm(w, r); err != nil {
				return err
			}
			if !equalTokens(r.PostForm.Get("csrf"), sess.CSRF) {
				return errPage(http.StatusForbidden, "Refused", "This form is stale or did not come from the inbox. Reload the page and try again.")
			}
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)))
	}
}

func equalTokens(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// checkOrigin refuses a request the browser says came from another site.
func checkOrigin(r *http.Request) error {
	refused := errPage(http.StatusForbidden, "Refused", "This request did not come from the inbox.")
	site := r.Header.Get("Sec-Fetch-Site")
	switch site {
	case "", "same-origin", "none":
	default:
		return refused
	}
	if site == "" && r.Header.Get("Origin") == "null" {
		return refused // an opaque origin, and nothing else to go by
	}
	// Under Referrer-Policy no-referrer, browsers send "Origin: null" with
	// their own form posts; Sec-Fetch-Site still tells where they came from.
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return refused
		}
	}
	return nil
}

func parseForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return errPage(http.StatusBadRequest, "Bad request", "The form could not be read.")
	}
	return nil
}

func (in *Inbox) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: in.secureRequest(r), SameSite: http.SameSiteStrictMode,
	})
}

type loginData struct {
	Next    string
	Problem string
	// Code names the problem for programs, as the API's error codes do.
	Code string
	CSRF string
}

func (in *Inbox) handleLoginForm(w http.ResponseWriter, r *http.Request) error {
	sess, err := in.session(r)
	if err != nil {
		return err
	}
	if sess != nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	return in.loginForm(w, r, http.StatusOK, &loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

// loginForm renders the sign-in form with a fresh per-form token, set in a
// cookie too (a session does not exist yet to hold it).
func (in *Inbox) loginForm(w http.ResponseWriter, r *http.Request, status int, d *loginData) error {
	d.CSRF = randomToken()
	in.setCookie(w, r, loginCookie, d.CSRF, 600)
	in.render(w, r, status, "login", &pageData{Title: "Sign in", Data: d})
	return nil
}

func (in *Inbox) handleLogin(w http.ResponseWriter, r *http.Request) error {
	// Before any work: the limit is what makes guessing keys slow.
	if ok, wait := in.limiter.allow(in.clientKey(r)); !ok {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		return in.loginForm(w, r, http.StatusTooManyRequests, &loginData{Next: "/", Code: "TOO_MANY_REQUESTS",
			Problem: "Too many sign-in attempts from your address. Try again in " + strconv.Itoa(secs) + " seconds."})
	}
	if err := checkOrigin(r); err != nil {
		return err
	}
	if err := parseForm(w, r); err != nil {
		return err
	}
	next := safeNext(r.PostForm.Get("next"))
	problem := func(status int, msg string) error {
		return in.loginForm(w, r, status, &loginData{Next: next, Problem: msg})
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || !equalTokens(r.PostForm.Get("csrf"), c.Value) {
		return problem(http.StatusForbidden, "The sign-in form expired. Paste your key again.")
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	token = strings.TrimPrefix(token, "Bearer ")
	if token == "" || len(token) > maxTokenBytes {
		return problem(http.StatusUnauthorized, "Paste an API key or a JWT.")
	}
	ctx := r.Context()
	cred, err := auth.AuthenticateCredential(ctx, in.auth, token)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		return problem(http.StatusUnauthorized, "That key or token is not valid.")
	case err != nil:
		in.log.LogAttrs(ctx, slog.LevelError, "inbox sign-in: authenticator failed", slog.Any("err", err))
		return problem(http.StatusServiceUnavailable, "Sign-in is unavailable right now; try again in a moment.")
	case cred.Identity.Tenant == "" || cred.Identity.Actor == "":
		return errors.New("sign in: the authenticator returned an identity without tenant or actor")
	}
	// The engine removes a bounded batch of expired sessions as it starts
	// this one; the limiter above bounds how often.
	raw, sess, err := in.engine.StartSession(ctx, &countersign.StartSessionParams{
		Identity: cred.Identity, Credential: token, Revocable: cred.Revocable,
		TTL: in.ttl, NotAfter: cred.ExpiresAt,
	})
	if errors.Is(err, countersign.ErrAgentCannotDecide) {
		return problem(http.StatusForbidden, "That is an agent's key: the inbox is for people. Sign in with your own key or token.")
	}
	if errors.Is(err, countersign.ErrInvalidCall) {
		// The token expired between its check and now.
		return problem(http.StatusUnauthorized, "That key or token is not valid.")
	}
	if err != nil {
		return err
	}
	in.setCookie(w, r, loginCookie, "", -1)
	// At least a second: a Max-Age of 0 would make it a cookie without one.
	in.setCookie(w, r, sessionCookie, raw, max(1, int(sess.ExpiresAt.Sub(sess.CreatedAt)/time.Second)))
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

func (in *Inbox) handleLogout(w http.ResponseWriter, r *http.Request) error {
	if err := in.engine.EndSession(r.Context(), sessionToken(r)); err != nil {
		return err
	}
	in.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// handleEvents streams the API's proposal events to a signed-in browser,
// for no longer than the session lasts: the stream ends at the session's
// expiry, and within sessionRecheck of the session ending otherwise (signed
// out, or its key withdrawn; recheckSessions).
func (in *Inbox) handleEvents(w http.ResponseWriter, r *http.Request) {
	sess, err := in.session(r)
	if errors.Is(err, cstype.ErrUnavailable) {
		in.log.LogAttrs(r.Context(), slog.LevelWarn, "inbox: event stream: session: the store cannot be reached", slog.Any("err", err))
		w.Header().Set("Retry-After", "2")
		http.Error(w, "the inbox cannot reach its database; try again in a moment", http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		in.log.LogAttrs(r.Context(), slog.LevelError, "inbox: event stream: session", slog.Any("err", err))
		http.Error(w, "the inbox could not answer", http.StatusInternalServerError)
		return
	}
	if sess == nil {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	ctx, cancel := context.WithDeadline(r.Context(), sess.ExpiresAt)
	defer cancel()
	defer in.streams.Add(sessionToken(r), struct{}{}, cancel)()
	in.api.StreamEvents(w, r.WithContext(ctx), sess.Identity)
}

// sessionRecheck is how often the inbox checks that the sessions of its
// open event streams still stand: docs/api.md asks that a stream end within
// a second of its credential being revoked (a sign-out, a key removed).
// One store read a round for all of them (Engine.Sessions), however many
// streams are open.
const sessionRecheck = 500 * time.Millisecond

// sessionAskTimeout bounds a round's reads.
const sessionAskTimeout = 10 * time.Second

// recheckSessions is a round of the inbox's stream guard (in.streams,
// internal/recheck): it reads the sessions of the open streams at once and
// ends the streams of each session that has ended (signed out, expired, its
// credential withdrawn). A round that cannot read (the store is down)
// leaves the streams be until the next.
func (in *Inbox) recheckSessions(tokens []string) {
	ctx, cancel := context.WithTimeout(context.Background(), sessionAskTimeout)
	defer cancel()
	live, err := in.engine.Sessions(ctx, tokens)
	if err != nil {
		in.log.LogAttrs(ctx, slog.LevelWarn, "inbox: event streams: check the sessions", slog.Any("err", err))
		return
	}
	for _, token := range tokens {
		sess := live[token]
		if sess != nil {
			if sess, err = in.standing(ctx, token, sess); err != nil {
				in.log.LogAttrs(ctx, slog.LevelWarn, "inbox: event stream: check the session", slog.Any("err", err))
				continue
			}
		}
		if sess == nil {
			in.streams.End(token, nil)
		}
	}
}
