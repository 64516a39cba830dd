package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
)

// requestError says why a chat-completion request failed: the HTTP status
// and the provider's message for an API error, the timeout, or the
// transport's error. resp is the last attempt's response, if any.
func (m *Model) requestError(ctx context.Context, resp *http.Response, err error) error {
	var apiErr *sdk.Error
	switch {
	case errors.As(err, &apiErr):
		// Our own text: the SDK's says only the status.
		return &wrappedError{text: "openai: chat completion: " + statusText(apiErr.StatusCode, providerMessage(apiErr)), cause: err}
	case ctx.Err() != nil:
		// The caller's deadline or cancellation, which spans the retries.
		return fmt.Errorf("openai: chat completion: %w", ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("openai: chat completion: no answer within %s (the per-request timeout): %w", m.timeout, err)
	case resp != nil && resp.StatusCode >= 400:
		// An error status whose body the SDK could not read as an API
		// error (not JSON, or no "error" object).
		return &wrappedError{text: "openai: chat completion: " + statusText(resp.StatusCode, ""), cause: err}
	default:
		return fmt.Errorf("openai: chat completion: %w", err)
	}
}

func statusText(code int, message string) string {
	s := fmt.Sprintf("HTTP %d", code)
	if t := http.StatusText(code); t != "" {
		s += " " + t
	}
	if message != "" {
		s += ": " + message
	}
	return s
}

// providerMessage is the error object's message, with its type or code
// when it has one, clipped to one line.
func providerMessage(e *sdk.Error) string {
	msg := clip(e.Message)
	if kind := clip(strings.TrimSpace(e.Code)); kind != "" {
		msg += " (" + kind + ")"
	} else if kind := clip(strings.TrimSpace(e.Type)); kind != "" {
		msg += " (" + kind + ")"
	}
	return strings.TrimSpace(msg)
}

// scrub makes sure no error text carries the API key: a provider or proxy
// may echo it back in a message. The cause stays reachable with errors.Is
// and errors.As.
func (m *Model) scrub(err error) error {
	if err == nil || m.apiKey == "" || !strings.Contains(err.Error(), m.apiKey) {
		return err
	}
	return &wrappedError{text: strings.ReplaceAll(err.Error(), m.apiKey, "[redacted]"), cause: err}
}

// wrappedError is an error with a text of its own that still unwraps to
// its cause.
type wrappedError struct {
	text  string
	cause error
}

func (e *wrappedError) Error() string { return e.text }
func (e *wrappedError) Unwrap() error { return e.cause }
