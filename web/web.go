package web

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/server/auth"
)

// Defaults of Options.
const (
	// DefaultSessionTTL is a session's lifetime from sign-in.
	DefaultSessionTTL = 8 * time.Hour
	// DefaultMaxSessions bounds the sessions held in memory.
	DefaultMaxSessions = 10000
	// PageSize is how many proposals one page of the list shows.
	PageSize = 50
)

// ContentSecurityPolicy is sent with every page: nothing inline, nothing
// from another origin.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

//go:embed templates static
var assets embed.FS

// Options configures an Inbox.
type Options struct {
	// Engine decides and lists proposals. Required.
	Engine *countersign.Engine
	// Auth resolves the API key or JWT pasted at sign-in. Required.
	Auth auth.Authenticator
	// API serves every path that is not the inbox's, and the event stream
	// behind live updates. Required.
	API *server.Server
	// SessionTTL is a session's lifetime from sign-in. Default
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxSessions bounds the sessions held in memory; sign-in fails while
	// that many are live. Default DefaultMaxSessions.
	MaxSessions int
	// SecureCookies marks the session cookie Secure even on plain HTTP
	// requests, for a server behind a TLS-terminating proxy. Requests that
	// arrive over TLS always get Secure cookies.
	SecureCookies bool
	// Logger receives the causes of 500s. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of sessions. Default time.Now.
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
	case o.MaxSessions < 0:
		return fmt.Errorf("web: Options.MaxSessions %d: must not be negative", o.MaxSessions)
	}
	return nil
}

// Inbox serves the approver's web inbox. It is safe for concurrent use.
type Inbox struct {
	engine   *countersign.Engine
	auth     auth.Authenticator
	api      *server.Server
	sessions *sessions
	secure   bool
	log      *slog.Logger
	pages    map[string]*template.Template
	handler  http.Handler
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
	in := &Inbox{
		engine: opts.Engine,
		auth:   opts.Auth,
		api:    opts.API,
		secure: opts.SecureCookies,
		log:    opts.Logger,
		pages:  pages,
		sessions: newSessions(
			cmpOr(opts.SessionTTL, DefaultSessionTTL),
			cmpOr(opts.MaxSessions, DefaultMaxSessions),
			opts.Now,
		),
	}
	if in.log == nil {
		in.log = slog.Default()
	}
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

// Handler serves the inbox's pages and passes every other path to the API.
func (in *Inbox) Handler() http.Handler { return in.handler }

func (in *Inbox) routes() http.Handler {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	files := http.FileServerFS(static)
	m.Handle("GET /static/", secured(http.StripPrefix("/static/", noListing(files))))
	m.Handle("GET /{$}", in.page(in.handleList))
	m.Handle("GET /login", in.page(in.handleLoginForm))
	m.Handle("POST /login", in.page(in.handleLogin))
	m.Handle("POST /logout", in.page(in.signedIn(in.handleLogout)))
	m.Handle("GET /proposals/{id}", in.page(in.signedIn(in.handleProposal)))
	m.Handle("POST /proposals/{id}/decide", in.page(in.signedIn(in.handleDecide)))
	m.Handle("POST /proposals/{id}/resolve", in.page(in.signedIn(in.handleResolve)))
	m.Handle("GET /events", secured(http.HandlerFunc(in.handleEvents)))
	// Everything else is the API's (and its 404s and 405s).
	m.Handle("/", in.api.Handler())
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
	if !ok {
		if r.Context().Err() == nil {
			in.log.LogAttrs(r.Context(), slog.LevelError, "inbox request failed",
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		}
		pe = errPage(http.StatusInternalServerError, "Something went wrong", "The inbox could not answer. Try again in a moment.")
	}
	sess, _ := in.sessions.get(r)
	in.render(w, r, pe.status, "error", &pageData{Title: pe.title, Session: sess, Data: struct{ Title, Message string }{pe.title, pe.message}})
}
