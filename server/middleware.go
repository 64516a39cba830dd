package server

import (
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// recorder remembers the status a handler answered with, for metrics, logs
// and for knowing whether an error can still be written.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	actor  string
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote && code >= 200 {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Flush, deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush implements http.Flusher for code that asserts it.
func (r *recorder) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

// innermost unwraps w down to the server's own ResponseWriter, which
// http.MaxBytesReader needs to close the connection after an oversized body.
func innermost(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// observe records every request's duration by route and status, and logs it.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		d := time.Since(start)
		// The mux sets r.Pattern on the request it was handed: this one.
		route := "unmatched"
		if _, path, ok := strings.Cut(r.Pattern, " "); ok {
			route = path
		}
		s.metrics.observeHTTP(route, r.Method, rec.status, d)
		level := s.reqLog
		switch {
		case rec.status >= 500:
			level = slog.LevelError
		case route == "/healthz" || route == "/readyz" || route == "/metrics":
			level = min(level, slog.LevelDebug) // probes and scrapes, every few seconds
		}
		if !s.log.Enabled(r.Context(), level) {
			return // the attributes below cost more than the check
		}
		s.log.LogAttrs(r.Context(), level, "http request",
			slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
			slog.Int("status", rec.status), slog.Duration("duration", d), slog.String("actor", rec.actor))
	})
}

// recover turns a handler's panic into a logged 500, so one bad request
// cannot take the process down.
func (s *Server) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.LogAttrs(r.Context(), slog.LevelError, "handler panicked",
				slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			if rec, ok := w.(*recorder); !ok || !rec.wrote {
				writeError(w, errInternal)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// CORS answers: the methods and request headers browsers may use.
const (
	corsMethods = "GET, POST, DELETE"
	corsHeaders = "Authorization, Content-Type, Countersign-Via, Last-Event-ID"
	corsMaxAge  = "600"
)

// withCORS applies the configured origins. Access-Control-Expose-Headers is
// on every answer (docs/api.md), so a browser may read the next-page cursor.
func (s *Server) withCORS(next http.Handler) http.Handler {
	anyOrigin := slices.Contains(s.cors, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Expose-Headers", NextHeader)
		origin := r.Header.Get("Origin")
		if origin != "" {
			h.Add("Vary", "Origin")
			switch {
			case anyOrigin:
				h.Set("Access-Control-Allow-Origin", "*")
			case slices.Contains(s.cors, origin):
				h.Set("Access-Control-Allow-Origin", origin)
			default:
				origin = "" // not allowed: answer as if no CORS were asked for
			}
		}
		if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
			if origin != "" {
				h.Set("Access-Control-Allow-Methods", corsMethods)
				h.Set("Access-Control-Allow-Headers", corsHeaders)
				h.Set("Access-Control-Max-Age", corsMaxAge)
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withDeadlines bounds each answer's writing, since the http.Server's
// WriteTimeout must stay 0 for long-polls and streams (streams set a deadline
// per event). Reading needs nothing here: ReadTimeout bounds the request and
// its body, and net/http lifts it once the body is consumed, so a long-poll
// outlives it (TestSlowHandlersOutliveReadTimeout).
func (s *Server) withDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An error means the writer cannot set deadlines (a test recorder).
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(handlerWriteTimeout))
		next.ServeHTTP(w, r)
	})
}
