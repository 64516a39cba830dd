package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/server/auth"
)

const (
	sessionCookie = "countersign_session"
	loginCookie   = "countersign_login"
	// maxTokenBytes bounds a pasted token, as the API bounds bearer tokens.
	maxTokenBytes = 8 << 10
	// maxFormBytes bounds a posted form.
	maxFormBytes = 64 << 10
)

// session is one signed-in browser.
type session struct {
	Identity countersign.Identity
	csrf     string
	expires  time.Time
}

// sessions holds the live sessions, keyed by the SHA-256 of their ids so
// that the map holds nothing a browser could present.
type sessions struct {
	mu  sync.Mutex
	m   map[[sha256.Size]byte]*session
	ttl time.Duration
	max int
	now func() time.Time
}

func newSessions(ttl time.Duration, maxN int, now func() time.Time) *sessions {
	if now == nil {
		now = time.Now
	}
	return &sessions{m: map[[sha256.Size]byte]*session{}, ttl: ttl, max: maxN, now: now}
}

var errTooManySessions = errors.New("too many sessions")

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for id and returns its cookie value.
func (s *sessions) create(id countersign.Identity) (string, *session, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		for k, v := range s.m {
			if !now.Before(v.expires) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= s.max {
			return "", nil, errTooManySessions
		}
	}
	raw := randomToken()
	sess := &session{Identity: id, csrf: randomToken(), expires: now.Add(s.ttl)}
	s.m[sha256.Sum256([]byte(raw))] = sess
	return raw, sess, nil
}

// get returns the request's live session.
func (s *sessions) get(r *http.Request) (*session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 100 {
		return nil, false
	}
	key := sha256.Sum256([]byte(c.Value))
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[key]
	if !ok {
		return nil, false
	}
	if !s.now().Before(sess.expires) {
		delete(s.m, key)
		return nil, false
	}
	return sess, true
}

// end deletes the request's session.
func (s *sessions) end(r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		delete(s.m, sha256.Sum256([]byte(c.Value)))
		s.mu.Unlock()
	}
}

type sessionKey struct{}

// sessionOf returns the session signedIn stored in r's context.
func sessionOf(r *http.Request) *session {
	sess, _ := r.Context().Value(sessionKey{}).(*session)
	return sess
}

// signedIn runs h for a signed-in browser. A page asked for without a
// session sends the browser to sign in and back; a POST is refused. Every
// POST must carry the session's CSRF token and come from this origin.
func (in *Inbox) signedIn(h pageFunc) pageFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		sess, ok := in.sessions.get(r)
		if !ok {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
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
			if !equalTokens(r.PostForm.Get("csrf"), sess.csrf) {
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

// secureRequest reports whether cookies for r must be Secure.
func (in *Inbox) secureRequest(r *http.Request) bool { return in.secure || r.TLS != nil }

func (in *Inbox) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: in.secureRequest(r), SameSite: http.SameSiteStrictMode,
	})
}

type loginData struct {
	Next    string
	Problem string
	CSRF    string
}

// safeNext returns next when it is a path of this site, else "/".
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	return next
}

func (in *Inbox) handleLoginForm(w http.ResponseWriter, r *http.Request) error {
	if _, ok := in.sessions.get(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	return in.loginForm(w, r, http.StatusOK, safeNext(r.URL.Query().Get("next")), "")
}

// loginForm renders the sign-in form with a fresh per-form token, set in a
// cookie too (a session does not exist yet to hold it).
func (in *Inbox) loginForm(w http.ResponseWriter, r *http.Request, status int, next, problem string) error {
	tok := randomToken()
	in.setCookie(w, r, loginCookie, tok, 600)
	in.render(w, r, status, "login", &pageData{Title: "Sign in", Data: &loginData{Next: next, Problem: problem, CSRF: tok}})
	return nil
}

func (in *Inbox) handleLogin(w http.ResponseWriter, r *http.Request) error {
	if err := checkOrigin(r); err != nil {
		return err
	}
	if err := parseForm(w, r); err != nil {
		return err
	}
	next := safeNext(r.PostForm.Get("next"))
	c, err := r.Cookie(loginCookie)
	if err != nil || !equalTokens(r.PostForm.Get("csrf"), c.Value) {
		return in.loginForm(w, r, http.StatusForbidden, next, "The sign-in form expired. Paste your key again.")
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	token = strings.TrimPrefix(token, "Bearer ")
	if token == "" || len(token) > maxTokenBytes {
		return in.loginForm(w, r, http.StatusUnauthorized, next, "Paste an API key or a JWT.")
	}
	id, err := in.auth.Authenticate(r.Context(), token)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		return in.loginForm(w, r, http.StatusUnauthorized, next, "That key or token is not valid.")
	case err != nil:
		in.log.LogAttrs(r.Context(), slog.LevelError, "inbox sign-in: authenticator failed", slog.Any("err", err))
		return in.loginForm(w, r, http.StatusServiceUnavailable, next, "Sign-in is unavailable right now; try again in a moment.")
	case id.Tenant == "" || id.Actor == "":
		return errors.New("sign in: the authenticator returned an identity without tenant or actor")
	}
	raw, _, err := in.sessions.create(id)
	if errors.Is(err, errTooManySessions) {
		return in.loginForm(w, r, http.StatusServiceUnavailable, next, "Too many people are signed in; try again later.")
	}
	in.setCookie(w, r, loginCookie, "", -1)
	in.setCookie(w, r, sessionCookie, raw, int(in.sessions.ttl/time.Second))
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

func (in *Inbox) handleLogout(w http.ResponseWriter, r *http.Request) error {
	in.sessions.end(r)
	in.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// handleEvents streams the API's proposal events to a signed-in browser.
func (in *Inbox) handleEvents(w http.ResponseWriter, r *http.Request) {
	sess, ok := in.sessions.get(r)
	if !ok {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	in.api.StreamEvents(w, r, sess.Identity)
}
