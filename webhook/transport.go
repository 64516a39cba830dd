package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/redact"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// MaxResponseBytes bounds a backend's response body. A longer body is an
// error (for execute: an uncertain outcome).
const MaxResponseBytes = 1 << 20

// defaultClient is shared by every action built without Options.Client.
var defaultClient = sync.OnceValue(newDefaultClient)

// newDefaultClient returns a client with bounded dial, TLS handshake and
// response headers that opens a new connection for every request.
//
// A pooled connection that the backend closed while it sat idle fails only
// once a request has been written to it, and then nobody can tell whether the
// backend read that request: an execute on it would be uncertain, and a
// prepare an error, for no real reason. Webhook calls come at the pace of
// agents and approvers, so each pays a handshake to make that race
// impossible.
func newDefaultClient() *http.Client {
	return noRedirects(&http.Client{Transport: &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    5 * time.Second,
		DisableKeepAlives:      true,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}})
}

// traced returns a copy of c whose requests are client spans of tp that
// carry their W3C traceparent. The wrapped transport still reports its
// progress through the request's httptrace (otelhttp adds none of its own
// unless asked), so "may have been sent" is judged as before.
func traced(c *http.Client, tp trace.TracerProvider) *http.Client {
	cc := *c
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	cc.Transport = otelhttp.NewTransport(next, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))
	return &cc
}

// noRedirects returns a copy of c that never follows a redirect: the 3xx
// response itself is the answer. An action only ever calls its configured
// URLs; a backend's answer can never send it elsewhere. net/http would copy
// the signature and the Idempotency-Key to any host a redirect names, and
// resend the body on 307 and 308; signed requests are never redirected at
// all (docs/decisions/0018-signing-secrets-and-redirects.md).
func noRedirects(c *http.Client) *http.Client {
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}

// response is a backend's answer, its body read up to MaxResponseBytes.
type response struct {
	status      int
	contentType string
	body        []byte
	// bodyErr says the body could not be read whole (a broken connection, a
	// time-out, a body over MaxResponseBytes): the status still stands.
	bodyErr error
}

// sendError is a request that got no response. sent says whether the request
// may have reached the backend (see post).
type sendError struct {
	sent bool
	err  error
}

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// progress records, through net/http/httptrace, how far a request got. The
// transport calls the hooks from its own goroutines.
type progress struct {
	asked     atomic.Bool // GetConn: the transport reports its progress
	connected atomic.Bool // GotConn: request bytes may be on the wire from here
	written   atomic.Bool // WroteRequest without error: all of it went out
	answered  atomic.Bool // GotFirstResponseByte
}

func (p *progress) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn:      func(string) { p.asked.Store(true) },
		GotConn:      func(httptrace.GotConnInfo) { p.connected.Store(true) },
		WroteHeaders: func() { p.connected.Store(true) },
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			p.connected.Store(true)
			if i.Err == nil {
				p.written.Store(true)
			}
		},
		GotFirstResponseByte: func() { p.answered.Store(true) },
	}
}

// mayHaveBeenSent judges a request that failed without a response.
//
// Before the transport holds a connection (name resolution, dialing, the TLS
// handshake, a proxy's CONNECT) no byte of the request has left this process,
// so the backend cannot have acted on it. From the moment it holds one, the
// request may be on the wire: any later failure (a reset, a time-out, a
// connection closed before or during the response) leaves the outcome
// uncertain. A transport that does not report its progress through
// httptrace (http.Transport and its HTTP/2 path do) gets the benefit of the
// doubt only for errors that name a failed dial or lookup.
func (p *progress) mayHaveBeenSent(err error) bool {
	switch {
	case p.connected.Load():
		return true
	case p.asked.Load():
		return false
	}
	var dns *net.DNSError
	var op *net.OpError
	return !errors.As(err, &dns) && !(errors.As(err, &op) && op.Op == "dial")
}

// errNoResend refuses the transport a second copy of a request it already
// wrote in full.
var errNoResend = errors.New("the request was sent once and is not sent again")

// post signs body and POSTs it to the endpoint, with headers, within the
// endpoint's timeout. An error is always a *sendError: no response came.
//
// With a pooled client, net/http resends a request on a new connection when
// a reused one fails before any answer, if the request looks idempotent to
// it, and an Idempotency-Key header is enough. Resending is the engine's
// decision alone (docs/design.md §6: bounded, counted attempts, never for a
// non-idempotent action), so the body cannot be rewound once it was written
// in full and no answer came. (Once an answer came, the client rewinds the
// body only to prepare a 307 or 308 redirect, which it then does not follow.)
func (c *caller) post(ctx context.Context, client *http.Client, ep *endpoint, body []byte, headers map[string]string) (*response, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, ep.timeout, &timeoutError{ep.timeout})
	defer cancel()
	var p progress
	ctx = httptrace.WithClientTrace(ctx, p.trace())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		// The URL was checked by NewAction; nothing was sent.
		return nil, &sendError{err: err}
	}
	req.GetBody = func() (io.ReadCloser, error) {
		if p.written.Load() && !p.answered.Load() {
			return nil, errNoResend
		}
		return io.NopCloser(bytes.NewReader(body)), nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "countersign-webhook/1")
	req.Header.Set(SignatureHeader, Sign(c.secret, c.now(), body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	began := time.Now()
	resp, err := client.Do(req)
	if c.observe != nil {
		status := 0
		if err == nil {
			status = resp.StatusCode
		}
		c.observe(c.action, ep.name, time.Since(began), status)
	}
	if err != nil {
		return nil, &sendError{sent: p.mayHaveBeenSent(err), err: describe(ctx, err)}
	}
	defer resp.Body.Close()
	r := &response{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type")}
	r.body, err = io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	switch {
	case err != nil:
		r.bodyErr = fmt.Errorf("reading the body failed: %w", describe(ctx, err))
	case len(r.body) > MaxResponseBytes:
		r.body = r.body[:MaxResponseBytes]
		r.bodyErr = fmt.Errorf("the body is over %d bytes", MaxResponseBytes)
	}
	return r, nil
}

// String describes the answer for an error message: status and an excerpt.
func (r *response) String() string {
	s := fmt.Sprintf("HTTP %d", r.status)
	if t := http.StatusText(r.status); t != "" {
		s += " " + t
	}
	if x := excerpt(r.body, 256); x != "" {
		s += ": " + x
	}
	if r.bodyErr != nil {
		s += " (" + r.bodyErr.Error() + ")"
	}
	return s
}

// decode reads a whole JSON object body into v. Unknown fields are ignored,
// so that a backend may answer more than this version reads.
func (r *response) decode(v any) error {
	switch {
	case r.bodyErr != nil:
		return r.bodyErr
	case !isJSON(r.contentType):
		return fmt.Errorf("the Content-Type is %q, not application/json", excerpt([]byte(r.contentType), 64))
	case !bytes.HasPrefix(bytes.TrimLeft(r.body, " \t\r\n"), []byte("{")):
		return fmt.Errorf("the body is not a JSON object: %s", excerpt(r.body, 64))
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("the body is not the JSON expected: %w", err)
	}
	return nil
}

// describe makes a transport error readable, and drops the URL net/http puts
// in it: a configured URL may carry a token in its query, and these messages
// end up in outcomes an agent reads. Any other URL in the text (a proxy's,
// one a wrapped error repeats) is redacted.
func describe(ctx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var te *timeoutError
	if errors.As(context.Cause(ctx), &te) && !errors.As(err, &te) {
		err = fmt.Errorf("%w: %w", te, err)
	}
	return redact.Error(err)
}

// timeoutError is the cause of an endpoint's time-out.
type timeoutError struct{ limit time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("no answer within %v", e.limit) }
func (e *timeoutError) Timeout() bool { return true }

// isJSON reports whether a Content-Type names JSON.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// excerpt returns at most n bytes of b as printable UTF-8 on one line.
func excerpt(b []byte, n int) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		if !unicode.IsPrint(r) {
			r = ' '
		}
		if sb.Len()+utf8.RuneLen(r) > n {
			sb.WriteString("…")
			break
		}
		sb.WriteRune(r)
	}
	return strings.Join(strings.Fields(sb.String()), " ")
}
