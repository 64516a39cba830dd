package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
)

// APIError is an answer of the API with an HTTP error status, after the
// SDK's retries (if it was one to retry) gave up.
type APIError struct {
	// StatusCode is the HTTP status, e.g. 429.
	StatusCode int
	// Type is the provider's error type, e.g. "rate_limit_error"; empty
	// when the body had none.
	Type string
	// Message is the provider's explanation, cut to a few hundred bytes;
	// when the body had none, the start of the body.
	Message string
	// RequestID is the provider's id of the request, for its support.
	RequestID string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "anthropic: HTTP %d", e.StatusCode)
	if text := http.StatusText(e.StatusCode); text != "" {
		b.WriteString(" " + text)
	}
	if e.Type != "" {
		fmt.Fprintf(&b, " (%s)", e.Type)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " [request-id %s]", e.RequestID)
	}
	return b.String()
}

// requestError translates an error of the SDK's Messages.New. The SDK's
// own error texts carry the request's URL and the whole response body;
// ours carry what a run's failure needs and no SDK type.
func (m *Model) requestError(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	switch {
	case errors.As(err, &apiErr):
		e := &APIError{
			StatusCode: apiErr.StatusCode,
			Type:       string(apiErr.Type()),
			Message:    oneLine(apiErr.Message),
			RequestID:  clip(apiErr.RequestID),
		}
		if e.Message == "" {
			e.Message = oneLine(apiErr.RawJSON())
		}
		return e
	case ctx.Err() != nil:
		return fmt.Errorf("anthropic: %w", ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		// The caller's context is live, so the SDK's per-try timeout ran
		// out on the last try.
		tries := "1 try"
		if m.maxRetries > 0 {
			tries = fmt.Sprintf("%d tries", m.maxRetries+1)
		}
		return fmt.Errorf("anthropic: no answer within the request timeout (%s a try, %s): %w", m.timeout, tries, err)
	default:
		return fmt.Errorf("anthropic: %w", err)
	}
}

// oneLine makes a provider's text fit an error: spaces for line breaks,
// cut to maxQuoted bytes.
func oneLine(s string) string {
	return clip(strings.Join(strings.Fields(s), " "))
}

// redact keeps the API key out of err's text, whatever quoted it.
func (m *Model) redact(err error) error {
	if err == nil || len(m.apiKey) < minRedacted || !strings.Contains(err.Error(), m.apiKey) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), m.apiKey, "[redacted]"))
}

// minRedacted is the shortest key redact looks for: a shorter one is no
// real key, and replacing it would mangle ordinary words.
const minRedacted = 8
