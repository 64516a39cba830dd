package web

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/recheck"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/server/auth"
)

// Defaults of Options.
const (
	// DefaultSessionTTL is a session's lifetime from sign-in.
	DefaultSessionTTL = 8 * time.Hour
	// DefaultSignInBurst is how many sign-ins a client may try at once.
	DefaultSignInBurst = 10
	// DefaultSignInInterval is how often a client that used its burst may
	// try one more sign-in.
	DefaultSignInInterval = 6 * time.Second
	// DefaultSignInClients bounds the clients whose sign-ins are counted
	// apart; beyond it, new clients share one count.
	DefaultSignInClients = 10000
	// PageSize is how many proposals one page of the list shows.
	PageSize = 50
)

// ContentSecurityPolicy is sent with every page: nothing inline, nothing
// from another origin.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

//go:embed templates static
var assets embed.FS

// SecureCookies says when the inbox marks its cookies Secure, so that the
// browser sends them over HTTPS only.
type SecureCookies string

// The SecureCookies modes.
const (
	// SecureCookiesAuto marks cookies Secure when the request came over
	// TLS, or from a trusted proxy whose X-Forwarded-Proto says https.
	SecureCookiesAuto SecureCookies = "auto"
	// SecureCookiesAlways marks every cookie Secure: the inbox is reached
	// over HTTPS only, whatever the connection to it.
	SecureCookiesAlways SecureCookies = "always"
	// SecureCookiesNever never marks them: for plain-HTTP development.
	SecureCookiesNever SecureCookies = "never"
)

// Options configures an Inbox.
type Options struct {
	// Engine decides and lists proposals. Required.
	Engine *countersign.Engine
	// Auth resolves the API key or JWT pasted at sign-in. Required.
	Auth auth.Authenticator
	// API serves the event stream behind live updates. Required. The
	// inbox serves its own paths only; the API's are mounted beside it.
	API *server.Server
	// SessionTTL is a session's lifetime from sign-in, cut short by the
	// expiry of the token signed in with. Default DefaultSessionTTL.
	SessionTTL time.Duration
	// SecureCookies says when cookies are marked Secure. Default
	// SecureCookiesAuto.
	SecureCookies SecureCookies
	// TrustedProxies are the networks of the reverse proxies in front of
	// the inbox. Only a peer in one of them is believed about the client's
	// address (X-Forwarded-For) and scheme (X-Forwarded-Proto). Default
	// none.
	TrustedProxies []netip.Prefix
	// SignInBurst is how many sign-ins one client address may try at once.
	// Default DefaultSignInBurst.
	SignInBurst int
	// SignInInterval is how often a client may try one more sign-in once
	// its burst is used. Default DefaultSignInInterval.
	SignInInterval time.Duration
	// Logger receives the causes of 500s. Default slog.Default().
	Logger *slog.Logger
	// Now is the inbox's clock: of the sign-in limit, and of the deadlines
	// its pages speak of. Default time.Now.
	Now func() time.Time
}

func (o *Options) validate() error {
	switch {
	case o.Engine == nil:
		return errors.New("web: Options.Engine is required")
	case o.Auth == nil:
		return errors.New("web: Options.Auth is required")
	case o.API == nil:
		return errors.New("web: Options.API is required")
	case o.SessionTTL < 0:
		return fmt.Errorf("web: Options.SessionTTL %v: must not be negative", o.SessionTTL)
	case o.SignInBurst < 0:
		return fmt.Errorf("web: Options.SignInBurst %d: must not be negative", o.SignInBurst)
	case o.SignInInterval < 0:
		return fmt.Errorf("web: Options.SignInInterval %v: must not be negative", o.SignInInterval)
	}
	switch o.SecureCookies {
	case "", SecureCookiesAuto, SecureCookiesAlways, SecureCookiesNever:
	default:
		return fmt.Errorf("web: Options.SecureCookies %q: want auto, always or never", o.SecureCookies)
	}
	for i, p := range o.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("web: Options.TrustedProxies[%d]: not a network", i)
		}
	}
	return nil
}

// Inbox serves the approver's web inbox. It is safe for concurrent use.
type Inbox struct {
	engine  *countersign.Engine
	auth    auth.Authenticator
	api     *server.Server
	ttl     time.Duration
	secure  SecureCookies
	proxies []netip.Prefix
	limiter *limiter
	streams *recheck.Guard[string, struct{}] // open event streams by session token (session.go)
	now     func() time.Time
	log     *slog.Logger
	pages   map[string]*template.Template
	handler http.Handler
}

// New validates opts and returns an Inbox.
func New(opts Options) (*Inbox, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	proxies := make([]netip.Prefix, len(opts.TrustedProxies))
	for i, p := range opts.TrustedProxies {
		proxies[i] = p.Masked()
	}
	in := &Inbox{
		engine:  opts.Engine,
		auth:    opts.Auth,
		api:     opts.API,
		ttl:     cmpOr(opts.SessionTTL, DefaultSessionTTL),
		secure:  cmpOr(opts.SecureCookies, SecureCookiesAuto),
		proxies: proxies,
		limiter: newLimiter(cmpOr(opts.SignInBurst, DefaultSignInBurst), cmpOr(opts.SignInInterval, DefaultSignInInterval),
			DefaultSignInClients, now),
		now:   now,
		log:   opts.Logger,
		pages: pages,
	}
	if in.log == nil {
		in.log = slog.Default()
	}
	in.streams = recheck.New[string, struct{}](sessionRecheck, in.recheckSessions)
	in.handler = in.routes()
	return in, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Handler serves the inbox's paths, and a 404 page for any other: it passes
// nothing on, so mount it at / beside the API's paths.
func (in *Inbox) Handler() http.Handler { return in.handler }

func (in *Inbox) routes() http.Handler {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	files := http.FileServerFS(static)
	m.Handle("GET /static/", secured(http.StripPrefix("/static/", noListing(files))))
	m.Handle("GET /favicon.ico", secured(http.HandlerFunc(handleFavicon)))
	m.Handle("GET /{$}", in.page(in.handleList))
	m.Handle("GET /login", in.page(in.handleLoginForm))
	m.Handle("POST /login", in.page(in.handleLogin))
	m.Handle("POST /logout", in.page(in.signedIn(in.handleLogout)))
	m.Handle("GET /proposals/{id}", in.page(in.signedIn(in.handleProposal)))
	m.Handle("POST /proposals/{id}/decide", in.page(in.signedIn(in.handleDecide)))
	m.Handle("POST /proposals/{id}/resolve", in.page(in.signedIn(in.handleResolve)))
	m.Handle("GET /grants", in.page(in.signedIn(in.handleGrants)))
	m.Handle("POST /grants/{id}/revoke", in.page(in.signedIn(in.handleRevokeGrant)))
	m.Handle("GET /events", secured(http.HandlerFunc(in.handleEvents)))
	// Passkeys (passkeys.go): the pages, and the JSON routes their script
	// fetches a ceremony's options from.
	m.Handle("GET /passkeys", in.page(in.signedIn(in.handlePasskeys)))
	m.Handle("POST /passkeys/add", in.page(in.signedIn(in.handleAddPasskey)))
	m.Handle("POST /passkeys/remove", in.page(in.signedIn(in.handleRemovePasskey)))
	m.Handle("GET /passkeys/enroll/{token}", in.page(in.signedIn(in.handleEnrollPage)))
	m.Handle("POST /passkeys/enroll/{token}", in.page(in.signedIn(in.handleEnroll)))
	m.Handle("POST /passkeys/enroll/{token}/begin", in.jsonRoute(in.signedIn(in.handleEnrollBegin)))
	m.Handle("POST /passkeys/challenge", in.jsonRoute(in.signedIn(in.handleManageChallenge)))
	m.Handle("POST /passkeys/add/begin", in.jsonRoute(in.signedIn(in.handleAddBegin)))
	m.Handle("POST /proposals/{id}/step-up", in.jsonRoute(in.signedIn(in.handleStepUp)))
	m.Handle("/", in.page(func(http.ResponseWriter, *http.Request) error {
		return errPage(http.StatusNotFound, "Not found", "There is no such page.")
	}))
	return m
}

// secured adds the headers every inbox response carries.
func secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", ContentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// noListing refuses directory listings of the embedded assets.
func noListing(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || r.URL.Path[len(r.URL.Path)-1] == '/' {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// pageFunc handles one page. It returns an error (a *pageError, or anything
// else for a 500) instead of writing one.
type pageFunc func(w http.ResponseWriter, r *http.Request) error

// page runs h with the security headers and renders its error as a page.
func (in *Inbox) page(h pageFunc) http.Handler {
	return secured(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if err := h(w, r); err != nil {
			in.writeErr(w, r, err)
		}
	}))
}

// pageError is an error shown to the user as a page with its status.
type pageError struct {
	status  int
	title   string
	message string
}

func (e *pageError) Error() string { return e.message }

func errPage(status int, title, message string) *pageError {
	return &pageError{status: status, title: title, message: message}
}

func (in *Inbox) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	pe, ok := errors.AsType[*pageError](err)
	if !ok && errors.Is(err, cstype.ErrUnavailable) {
		in.log.LogAttrs(r.Context(), slog.LevelWarn, "inbox request failed: the store cannot be reached",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		w.Header().Set("Retry-After", "2")
		pe, ok = errPage(http.StatusServiceUnavailable, "Temporarily unavailable", "The inbox cannot reach its database. Try again in a moment."), true
	}
	if !ok {
		if r.Context().Err() == nil {
			in.log.LogAttrs(r.Context(), slog.LevelError, "inbox request failed",
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		}
		pe = errPage(http.StatusInternalServerError, "Something went wrong", "The inbox could not answer. Try again in a moment.")
	}
	// The page shows who is signed in, unless that is what failed.
	sess := sessionOf(r)
	if sess == nil {
		sess, _ = in.session(r)
	}
	in.render(w, r, pe.status, "error", &pageData{Title: pe.title, Session: sess, Data: struct{ Title, Message string }{pe.title, pe.message}})
}
