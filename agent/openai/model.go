package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/countersign/countersign/agent"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Defaults of [Options].
const (
	// DefaultMaxRetries is how many times a request is retried after a 408,
	// 409, 429, 5xx or a connection error, with the SDK's backoff.
	DefaultMaxRetries = 2
	// DefaultTimeout bounds each attempt of a request.
	DefaultTimeout = 60 * time.Second
)

// Options configure a [Model].
type Options struct {
	// Model is the provider's model name, like "gpt-4.1-mini". Required.
	Model string
	// BaseURL is the endpoint's base, the part before "/chat/completions"
	// (for instance "http://127.0.0.1:11434/v1"). Empty means the SDK's
	// default, OpenAI's own API.
	BaseURL string
	// APIKey is sent as a bearer token. Empty sends no Authorization header
	// (local endpoints that need none).
	APIKey string
	// MaxRetries is how many times the SDK retries a failed attempt; 0 means
	// DefaultMaxRetries, a negative value means no retry.
	MaxRetries int
	// Timeout bounds each attempt; 0 means DefaultTimeout. The caller's
	// context bounds the whole call, retries included.
	Timeout time.Duration
	// HTTPClient sends the requests; nil means http.DefaultClient. Tests
	// point it at a fake server.
	HTTPClient *http.Client
}

// Model is an [agent.Model] on an OpenAI-compatible chat-completions
// endpoint. It is safe for concurrent use.
type Model struct {
	completions sdk.ChatCompletionService
	model       string
	apiKey      string // kept only to scrub it from error texts
	timeout     time.Duration
}

var _ agent.Model = (*Model)(nil)

// New returns a Model for opts, or an error naming the option that is
// invalid.
func New(opts Options) (*Model, error) {
	if opts.Model == "" {
		return nil, errors.New("openai: Options.Model is required")
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("openai: Options.Timeout is negative (%s)", opts.Timeout)
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	retries := opts.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}

	// The client is assembled from the service constructor rather than
	// sdk.NewClient, which would also read OPENAI_API_KEY, OPENAI_BASE_URL,
	// OPENAI_CUSTOM_HEADERS and the like from the environment: the agent's
	// configuration is the only source of where requests go and what they
	// carry, so a key meant for one endpoint is never sent to another.
	reqOpts := []option.RequestOption{
		option.WithEnvironmentProduction(), // the SDK's default base URL
		option.WithAPIKey(opts.APIKey),
		option.WithMaxRetries(retries),
		option.WithRequestTimeout(timeout),
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("openai: Options.BaseURL %q is not an http(s) URL", opts.BaseURL)
		}
		reqOpts = append(reqOpts, option.WithBaseURL(opts.BaseURL))
	}
	if opts.HTTPClient != nil {
		reqOpts = append(reqOpts, option.WithHTTPClient(opts.HTTPClient))
	}
	return &Model{
		completions: sdk.NewChatCompletionService(reqOpts...),
		model:       opts.Model,
		apiKey:      opts.APIKey,
		timeout:     timeout,
	}, nil
}

// Generate asks the endpoint for the assistant's next message: one chat
// completion with req's instructions, conversation and tools. A reply it
// cannot map back (no choice, a refusal, a call of a tool that was not
// offered, arguments that are not a JSON object) is an error.
func (m *Model) Generate(ctx context.Context, req *agent.Request) (*agent.Reply, error) {
	if req == nil {
		return nil, errors.New("openai: nil request")
	}
	params, offered, err := m.newParams(req)
	if err != nil {
		return nil, m.scrub(err)
	}
	var resp *http.Response
	completion, err := m.completions.New(ctx, params, option.WithResponseInto(&resp))
	if err != nil {
		return nil, m.scrub(m.requestError(ctx, resp, err))
	}
	if resp != nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
		// The SDK takes any status below 400 for success; a 3xx the HTTP
		// client did not follow carries no completion.
		return nil, fmt.Errorf("openai: chat completion: %s", statusText(resp.StatusCode, ""))
	}
	reply, err := newReply(completion, offered)
	if err != nil {
		return nil, m.scrub(err)
	}
	return reply, nil
}
