package anthropic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/countersign/countersign/agent"
)

// The defaults of [Options].
const (
	DefaultMaxTokens  = 1024
	DefaultMaxRetries = 2
	DefaultTimeout    = 60 * time.Second
)

// Options configure a [Model]. The zero value of every field but Model
// means its default.
type Options struct {
	// Model is the model's name, e.g. "claude-sonnet-4-5". Required.
	Model string
	// BaseURL is the endpoint, without the "/v1" the API's paths carry
	// ("https://api.anthropic.com" is the default). Only http and https.
	BaseURL string
	// APIKey is sent as the request's credential. Empty sends none, for a
	// local endpoint that wants none. The composition root reads it from
	// the variable the configuration names; the environment is never read
	// here.
	APIKey string
	// MaxTokens caps the length of one reply (DefaultMaxTokens). A reply
	// cut off by it is an error.
	MaxTokens int
	// MaxRetries is how many times a request is sent again after a 429, a
	// 5xx (529 overloaded included), a connection error or a per-request
	// timeout, with the SDK's backoff (DefaultMaxRetries; negative: none).
	MaxRetries int
	// Timeout bounds each try of a request (DefaultTimeout). The caller's
	// context bounds them all together.
	Timeout time.Duration
	// HTTPClient sends the requests (tests). Nil: the SDK's default.
	HTTPClient *http.Client
}

// Model is an [agent.Model] on the Anthropic Messages API. It is safe for
// concurrent use.
type Model struct {
	client     sdk.Client
	model      string
	maxTokens  int64
	maxRetries int
	timeout    time.Duration
	apiKey     string // only to keep it out of error texts
}

var _ agent.Model = (*Model)(nil)

// New returns a Model for opts, or an error naming the option that is not
// valid. It makes no request.
func New(opts Options) (*Model, error) {
	if opts.Model == "" {
		return nil, errors.New("anthropic: Options.Model is required")
	}
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("anthropic: Options.MaxTokens is %d, it must not be negative", opts.MaxTokens)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("anthropic: Options.Timeout is %s, it must not be negative", opts.Timeout)
	}
	m := &Model{
		model:      opts.Model,
		maxTokens:  int64(cmp.Or(opts.MaxTokens, DefaultMaxTokens)),
		maxRetries: max(cmp.Or(opts.MaxRetries, DefaultMaxRetries), 0),
		timeout:    cmp.Or(opts.Timeout, DefaultTimeout),
		apiKey:     opts.APIKey,
	}
	ro := []option.RequestOption{
		// The composition root owns the configuration: no ANTHROPIC_*
		// variable, profile file or federation token may change where
		// requests go or which credential they carry.
		option.WithoutEnvironmentDefaults(),
		option.WithMaxRetries(m.maxRetries),
		option.WithRequestTimeout(m.timeout),
		// Conversations hold customers' words and tool results: spans
		// carry metadata only, whatever the environment asks.
		option.WithOpenTelemetryTracesContentMode(option.OpenTelemetryContentModeMetadataOnly),
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("anthropic: Options.BaseURL %q is not an http or https URL", opts.BaseURL)
		}
		ro = append(ro, option.WithBaseURL(opts.BaseURL))
	}
	if opts.APIKey != "" {
		ro = append(ro, option.WithAPIKey(opts.APIKey))
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	m.client = sdk.NewClient(ro...)
	return m, nil
}

// Generate sends req to the Messages API and returns the assistant's
// reply. See the package documentation for the mapping and for what is an
// error.
func (m *Model) Generate(ctx context.Context, req *agent.Request) (*agent.Reply, error) {
	if req == nil {
		return nil, errors.New("anthropic: no request")
	}
	params, offered, err := m.newParams(req)
	if err != nil {
		return nil, m.redact(err)
	}
	msg, err := m.client.Messages.New(ctx, params)
	if err != nil {
		return nil, m.redact(m.requestError(ctx, err))
	}
	reply, err := newReply(msg, offered, m.maxTokens)
	if err != nil {
		return nil, m.redact(err)
	}
	return reply, nil
}
