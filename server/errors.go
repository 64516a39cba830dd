package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/countersign/countersign"
)

// The error codes of docs/api.md, and the statuses they answer with.
const (
	CodeUnauthenticated   = "UNAUTHENTICATED"        // 401
	CodeForbidden         = "FORBIDDEN"              // 403
	CodeAgentCannotDecide = "AGENT_CANNOT_DECIDE"    // 403
	CodeInvalidRemember   = "INVALID_REMEMBER"       // 400
	CodeNotFound          = "NOT_FOUND"              // 404
	CodeActionNotFound    = "ACTION_NOT_FOUND"       // 404
	CodeMethodNotAllowed  = "METHOD_NOT_ALLOWED"     // 405
	CodeInvalidBody       = "INVALID_BODY"           // 400
	CodeInvalidInput      = "INVALID_INPUT"          // 400
	CodeInvalidCursor     = "INVALID_CURSOR"         // 400
	CodeBodyTooLarge      = "BODY_TOO_LARGE"         // 413
	CodeInvalidState      = "INVALID_STATE"          // 409
	CodeCallMismatch      = "CALL_MISMATCH"          // 409
	CodeThreadBusy        = "THREAD_BUSY"            // 409
	CodeMessageIDTaken    = "MESSAGE_ID_TAKEN"       // 409
	CodeTooManyRequests   = "TOO_MANY_REQUESTS"      // 429
	CodeUnsupportedMedia  = "UNSUPPORTED_MEDIA_TYPE" // 415
	CodeNotReady          = "NOT_READY"              // 503
	CodeUnavailable       = "UNAVAILABLE"            // 503
	CodeInternal          = "INTERNAL"               // 500
)

// apiError is an answer that is not a success: it carries the HTTP status and
// the body's error object. Handlers return it; the route wrapper writes it.
type apiError struct {
	status  int
	code    string
	message string
	details any
	// bodyStatus, when set, adds a top-level "status" (decisions answer 404
	// with {"status": "not_found", "error": …}).
	bodyStatus string
	// header, when set, adds response headers (WWW-Authenticate, Allow).
	header http.Header
	// cause, when set, is the error behind an answer whose message is a
	// fixed text: the route wrapper logs it, the caller never reads it.
	cause error
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

// errorBody is the JSON shape of every error answer.
type errorBody struct {
	Status string      `json:"status,omitempty"`
	Error  errorObject `json:"error"`
}

type errorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

// problem is one entry of details for INVALID_BODY and INVALID_INPUT: a
// location in the request and what is wrong there.
type problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func newError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

func errUnauthenticated(msg string) *apiError {
	e := newError(http.StatusUnauthorized, CodeUnauthenticated, "%s", msg)
	e.header = http.Header{"Www-Authenticate": {`Bearer realm="countersign"`}}
	return e
}

func errForbidden(format string, args ...any) *apiError {
	return newError(http.StatusForbidden, CodeForbidden, format, args...)
}

// agentRefused is the answer to an engine refusal of a decision-shaped act
// to an agent credential (403 AGENT_CANNOT_DECIDE), or nil when err is not
// one. Every mapping of the engine's errors asks it first, since the
// refusal also matches countersign.ErrForbidden.
func agentRefused(err error) *apiError {
	ae, ok := errors.AsType[*countersign.AgentCannotDecideError](err)
	if !ok {
		return nil
	}
	return newError(http.StatusForbidden, CodeAgentCannotDecide, "%s", ae.Error())
}

// invalidRemember is the answer to a remember scope the proposal cannot
// have (400 INVALID_REMEMBER), or nil when err is not one.
func invalidRemember(err error) *apiError {
	ie, ok := errors.AsType[*countersign.InvalidRememberError](err)
	if !ok {
		return nil
	}
	e := newError(http.StatusBadRequest, CodeInvalidRemember, "%s", ie.Reason)
	e.details = []problem{{Path: "remember", Message: ie.Reason}}
	return e
}

func errNotFound(format string, args ...any) *apiError {
	return newError(http.StatusNotFound, CodeNotFound, format, args...)
}

// errBadBody is a 400 INVALID_BODY naming the field (path) at fault.
func errBadBody(path, message string) *apiError {
	e := newError(http.StatusBadRequest, CodeInvalidBody, "%s", message)
	if path != "" {
		e.message = path + ": " + message
		e.details = []problem{{Path: path, Message: message}}
	}
	return e
}

// errBadParam is a 400 INVALID_INPUT naming a query parameter or header.
func errBadParam(name, message string) *apiError {
	e := newError(http.StatusBadRequest, CodeInvalidInput, "%s: %s", name, message)
	e.details = []problem{{Path: name, Message: message}}
	return e
}

// unavailableRetryAfter is the Retry-After, in seconds, of an answer given
// while the store cannot be reached: a restarting database is usually back
// within a few seconds.
const unavailableRetryAfter = "2"

// errUnavailable answers a request the store could not serve because it
// cannot be reached (cstype.ErrUnavailable): 503 with Retry-After, never 500.
func errUnavailable() *apiError {
	e := newError(http.StatusServiceUnavailable, CodeUnavailable, unavailableMessage)
	e.header = http.Header{"Retry-After": {unavailableRetryAfter}}
	return e
}

var errInternal = newError(http.StatusInternalServerError, CodeInternal, internalMessage)

// The fixed texts of answers whose cause is the server's own: a store's or
// driver's words (a constraint, a SQLSTATE, a file name) never reach a
// caller, on any surface; the server logs them.
const (
	internalMessage    = "internal error; the server logged the cause"
	unavailableMessage = "the store cannot be reached; try again shortly"
	storeRefusedText   = "the request holds a value the server cannot store"
)

// errStoreRefused answers a request the store refused as invalid
// (cstype.ErrInvalidParams: a value the database cannot hold, an id the
// caller chose that exists): 400 INVALID_BODY with a fixed text, since the
// store's words may be its driver's, and the cause logged.
func errStoreRefused(err error) *apiError {
	e := newError(http.StatusBadRequest, CodeInvalidBody, storeRefusedText)
	e.cause = err
	return e
}

// errMessageIDTaken answers a message whose id its thread holds (409
// MESSAGE_ID_TAKEN). It names only the id the caller sent and the thread
// the caller posts in.
func errMessageIDTaken(te *countersign.MessageIDTakenError) *apiError {
	e := newError(http.StatusConflict, CodeMessageIDTaken, "this thread already holds a message with id %q; choose another id", te.MessageID)
	e.details = []problem{{Path: "id", Message: "taken in this thread"}}
	return e
}

// writeError writes e as the JSON error body.
func writeError(w http.ResponseWriter, e *apiError) {
	for k, vs := range e.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	writeJSON(w, e.status, errorBody{
		Status: e.bodyStatus,
		Error:  errorObject{Code: e.code, Message: e.message, Details: e.details},
	})
}

// writeJSON writes v with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is built from JSON-safe types; a failure is
		// a bug, and must still answer in the documented shape.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"INTERNAL","message":"internal error: encode response"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
