package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/defaults"
	"github.com/countersign/countersign/textdecision"
)

// Defaults of the fields a file leaves out (docs/api.md, Configuration).
const (
	DefaultListen           = "127.0.0.1:8080"
	DefaultStore            = "sqlite:countersign.db"
	DefaultAutoMigrate      = true
	DefaultWebhookSecretEnv = "COUNTERSIGN_WEBHOOK_SECRET"

	DefaultPollInterval   = countersign.DefaultPollInterval   // worker.poll_interval
	DefaultLease          = countersign.DefaultLeaseDuration  // worker.lease
	DefaultMaxConcurrency = countersign.DefaultMaxConcurrency // worker.max_concurrency
	DefaultMaxAttempts    = countersign.DefaultMaxAttempts    // worker.max_attempts

	DefaultPostgresMaxConns = defaults.PostgresMaxConns // postgres.max_conns: pgstore.DefaultMaxConns

	// DefaultStoreConnectTimeout is how long serve and worker wait, at
	// start, for a store that cannot be reached (store.connect_timeout).
	DefaultStoreConnectTimeout = 60 * time.Second

	DefaultTTL      = countersign.DefaultTTL        // policy.default_ttl
	DefaultEffect   = countersign.EffectAsk         // a rule's effect
	DefaultApprover = countersign.ApproverRequester // a rule's approvers
	DefaultQuorum   = countersign.DefaultQuorum     // a rule's quorum
	DefaultMode     = countersign.DefaultMode       // a rule's mode

	DefaultActionVersion = "1"
	DefaultKind          = string(countersign.KindWrite)
	DefaultInputSchema   = `{"type":"object"}`
	DefaultHookTimeout   = 10 * time.Second // prepare, execute and reconcile

	DefaultMaxStreamsPerActor  = 8                 // events.max_streams_per_actor
	DefaultSecureCookies       = SecureCookiesAuto // web.secure_cookies
	DefaultProposalCountsEvery = 30 * time.Second  // metrics.proposal_counts_every

	// DefaultCheckpointEvery is how often the sealer signs the audit
	// chain's checkpoints (audit.checkpoint_every).
	DefaultCheckpointEvery = countersign.DefaultCheckpointEvery
	// MinCheckpointEvery is the shortest audit.checkpoint_every: the sealer
	// signs between its seals, once a second.
	MinCheckpointEvery = countersign.DefaultSealInterval

	DefaultTenantClaim = "tid"     // auth.jwt.claims.tenant
	DefaultActorClaim  = "sub"     // auth.jwt.claims.actor
	DefaultRolesClaim  = "roles"   // auth.jwt.claims.roles
	DefaultKindClaim   = "ck_kind" // auth.jwt.claims.kind
)

// Config is a parsed and validated configuration file. Build one with Load,
// Parse or Default. Its fields hold every default already resolved.
type Config struct {
	// Listen is the server's host:port.
	Listen string
	// Store is "sqlite:PATH" (relative to the working directory) or a
	// postgres:// or postgresql:// URL. See ParseStore. A file sets it as
	// "store: URL" or as "store: {url: URL, connect_timeout: 60s}".
	Store string
	// StoreConnectTimeout is how long serve and worker wait at start for a
	// store that cannot be reached (cstype.ErrUnavailable: PostgreSQL not
	// up yet, the database file's volume not mounted), retrying with
	// backoff, before they give up. Default DefaultStoreConnectTimeout.
	StoreConnectTimeout time.Duration
	// AutoMigrate makes serve apply pending migrations at boot.
	AutoMigrate bool
	Auth        Auth
	CORS        CORS
	// WebhookSecretEnv names the environment variable holding the secret
	// that signs webhook requests, of every action that names none of its
	// own (Action.WebhookSecretEnv). See WebhookSecret.
	WebhookSecretEnv string
	Worker           Worker
	// Postgres tunes a PostgreSQL store; other stores ignore it.
	Postgres Postgres
	// PolicySpec is the file's policy section; Policy converts it.
	PolicySpec PolicySpec
	// Actions are webhook actions, in file order.
	Actions []Action
	Metrics Metrics
	Events  Events
	Web     Web
	Log     Log
	// TextDecisions configures the decisions a human types in a
	// conversation ("yes", "não #prp_…"): the language's preset, replaced
	// phrases and replies. Its zero value is the English preset. See
	// TextVocabulary.
	TextDecisions textdecision.Config
	// DefaultAgent names the agent of Agents that answers a message naming
	// none; empty, such a message starts no run. See DefaultAgentName.
	DefaultAgent string
	// Agents are the configured agents, in file order.
	Agents []AgentSpec
	// MCP configures the MCP gateway: its upstream servers, where serve
	// mounts it, and how long a call holds for a decision.
	MCP MCP
	// Notifications are the receivers of the notification outbox, in file
	// order; without any, no notification is written.
	Notifications []Notification
	// Audit configures the audit chain's signed checkpoints.
	Audit Audit
	// PublicURL is where people reach this server (https://countersign.
	// acme.example): the links and buttons the approver channels send are
	// built under it, never from a request's Host. Required with Channels.
	PublicURL string
	// Channels are the approver channels (Slack, email).
	Channels Channels
	// Tracing configures OpenTelemetry tracing; nil when the file has no
	// tracing section (see TracingEnabled).
	Tracing *Tracing

	// file and lines locate fields in the parsed file for Validate's errors:
	// lines maps a field's path ("policy.rules[0].quorum") to its line.
	file  string
	lines map[string]int
}

// Auth lists who may call the server.
type Auth struct {
	APIKeys []APIKey
	// JWT is nil unless the file configures JWT bearer tokens.
	JWT *JWT
}

// APIKey is one static bearer token and the identity it stands for.
// Exactly one of Key and KeySHA256 is set in a file.
type APIKey struct {
	// Key is the token itself.
	Key string
	// KeySHA256 is the lowercase hex SHA-256 of the token, so that the file
	// need not hold it.
	KeySHA256 string
	Tenant    string
	Actor     string
	Roles     []string
	// Kind is "human" or "agent" (docs/api.md Part 3, "Credentials: humans and
	// agents"). Empty: human, with a warning (Warnings).
	Kind string
}

// Digest returns the SHA-256 of the key's token, from Key or KeySHA256.
// Compare it with the digest of a presented token in constant time.
func (k APIKey) Digest() [sha256.Size]byte {
	var d [sha256.Size]byte
	if k.Key != "" {
		return sha256.Sum256([]byte(k.Key))
	}
	_, _ = hex.Decode(d[:], []byte(k.KeySHA256)) // validated: 64 hex digits
	return d
}

// JWT configures JWT bearer tokens. A token must carry the issuer and the
// audience, and be signed by a key of JWKSFile or, with HS256, by the secret
// in the environment variable HS256SecretEnv names (exactly one of the two).
type JWT struct {
	Issuer   string
	Audience string
	// JWKSFile is a JSON Web Key Set file, relative to the working directory.
	JWKSFile string
	// HS256SecretEnv names the environment variable holding the HS256 secret.
	// See Config.HS256Secret.
	HS256SecretEnv string
	Claims         Claims
	// DefaultKind is the kind of a token without the kind claim: "human"
	// or "agent". Empty: human, with a warning (Warnings).
	DefaultKind string
}

// Claims names the JWT claims that carry the identity.
type Claims struct {
	Tenant string // default "tid"
	Actor  string // default "sub"
	Roles  string // default "roles"
	Kind   string // default "ck_kind"
}

// CORS configures cross-origin requests.
type CORS struct {
	// AllowedOrigins are origins ("https://inbox.example.com") or "*".
	// Empty: no cross-origin access.
	AllowedOrigins []string
}

// Worker configures the background worker and execution retries.
type Worker struct {
	PollInterval   time.Duration // default 1s; less than a third of Lease
	Lease          time.Duration // default 30s
	MaxConcurrency int           // default 4
	// MaxAttempts bounds the executions of an idempotent action whose
	// outcome stays uncertain. Default 5.
	MaxAttempts int
}

// MaxPostgresMaxConns is the largest postgres.max_conns: PostgreSQL's own
// limit on max_connections, which no pool can exceed.
const MaxPostgresMaxConns = 262143

// Postgres tunes the connection pool of a PostgreSQL store.
type Postgres struct {
	// MaxConns is the pool's size, unless the store URL sets
	// pool_max_conns, which wins. Default DefaultPostgresMaxConns
	// (pgstore.DefaultMaxConns), which a file's 0 also means. Size it for
	// the requests the server serves at once plus worker.max_concurrency,
	// within the database's max_connections across every process.
	MaxConns int
}

// PolicySpec is the policy section of a file.
type PolicySpec struct {
	// DefaultTTL applies to rules without a TTL. Default 10m.
	DefaultTTL time.Duration
	Rules      []Rule
}

// Rule is one policy rule (see countersign.Rule).
type Rule struct {
	// Match is an action name or a glob ("payments.*").
	Match string
	// When, if set, is a CEL expression over the call (input, actor,
	// tenant, thread_id, action) that must hold for the rule to apply
	// (see countersign.Rule.When).
	When string
	// Effect is allow, ask or deny. Default ask.
	Effect countersign.Effect
	// Approvers are "requester", "role:NAME" or "actor:ID". Default requester.
	Approvers []string
	// Quorum is the number of distinct approvers needed. Default 1.
	Quorum             int
	ForbidSelfApproval bool
	// TTL is how long a proposal waits for decisions. Zero: the policy's
	// DefaultTTL.
	TTL time.Duration
	// Mode is wait, two_phase or independent. Default wait.
	Mode countersign.Mode
	// Channels, if not empty, are the only channels that may decide.
	Channels []string
	// Notify lists the approver channels (slack, email) that announce the
	// rule's proposals; each must be configured under channels.
	Notify []string
	// StepUp is "passkey" for a rule whose every approval needs a passkey
	// assertion, or empty.
	StepUp string
	// Remember lists the remember scopes an approver may ask for.
	Remember []countersign.Scope
	// EscalateAfter and EscalateTo: still pending that long, the proposal
	// adds these approvers, once. RemindEvery: a reminder that often while
	// pending.
	EscalateAfter time.Duration
	EscalateTo    []string
	RemindEvery   time.Duration
}

// Action is a webhook action: an action whose hooks are HTTP endpoints of
// the caller's backend (docs/api.md, Webhook actions).
type Action struct {
	Name        string
	Version     string // default "1"
	Kind        string // "read" or "write"; default "write"
	Description string
	// InputSchema is the JSON Schema of the input, converted from the
	// file's YAML. Default {"type":"object"}.
	InputSchema json.RawMessage
	// Confirmation is the approver's copy; Title may hold {path} placeholders.
	Confirmation struct{ Title, Verb string }
	// ReplacementKey is a template ("{customer}"): a new proposal with the
	// same requester, thread, action and key supersedes the pending ones.
	ReplacementKey string
	Idempotent     bool
	// WebhookSecretEnv, if set, names the environment variable whose secret
	// signs this action's webhook requests instead of the top-level
	// webhook_secret_env, so that its backend holds a secret no other
	// backend can sign with. See Config.ActionWebhookSecret.
	WebhookSecretEnv string
	// Execute is required: an endpoint, or {by: caller} for an action the
	// calling agent runs itself (ExecutedByCaller). Prepare and Reconcile
	// are nil when absent.
	Prepare, Execute, Reconcile *Endpoint
}

// ExecutedByCaller reports whether the calling agent runs the action
// itself (`execute: {by: caller}`, docs/api.md: Caller-executed actions).
func (a *Action) ExecutedByCaller() bool { return a.Execute != nil && a.Execute.By == ExecuteByCaller }

// ExecuteByCaller is the value of `execute.by` for a caller-executed action.
const ExecuteByCaller = "caller"

// Endpoint is one webhook hook.
type Endpoint struct {
	// URL is an absolute http or https URL.
	URL string
	// Timeout bounds one request. Default 10s.
	Timeout time.Duration
	// By is set only on execute, to "caller": the calling agent runs the
	// action, and there is no URL.
	By string
}

// Metrics configures /metrics.
type Metrics struct {
	// RequireRole, if set, closes /metrics to callers without this role.
	RequireRole string
	// ProposalCountsEvery is how often the countersign_proposals gauge is
	// recounted in the store; a scrape reads the last count. Default 30s.
	ProposalCountsEvery time.Duration
}

// Events configures the event stream (GET /v1/events).
type Events struct {
	// MaxStreamsPerActor bounds the streams one actor holds open at once in
	// one process. Default 8.
	MaxStreamsPerActor int
}

// The values of web.secure_cookies.
const (
	// SecureCookiesAuto marks the inbox's cookies Secure when the request
	// came over TLS, or from a trusted proxy that says it did.
	SecureCookiesAuto = "auto"
	// SecureCookiesAlways marks them Secure on every request.
	SecureCookiesAlways = "always"
	// SecureCookiesNever never does (plain-HTTP development only).
	SecureCookiesNever = "never"
)

// Audit configures the audit chain's signed checkpoints (docs/audit.md).
type Audit struct {
	// SigningKeyFile is an Ed25519 private key, PKCS#8 PEM (`countersign
	// audit keygen` writes one), relative to the working directory; serve
	// refuses one that group or others may read. Empty: no checkpoint is
	// signed.
	SigningKeyFile string
	// CheckpointEvery is how often the sealer signs every tenant's chain,
	// idle or not. Default DefaultCheckpointEvery (1m); at least
	// MinCheckpointEvery (1s).
	CheckpointEvery time.Duration
}

// Web configures the approver's inbox.
type Web struct {
	// SecureCookies is auto, always or never. Default auto.
	SecureCookies string
	// TrustedProxies are the CIDR prefixes of the reverse proxies whose
	// X-Forwarded-Proto the inbox believes. See TrustedProxies.
	TrustedProxies []string
}

// Default returns the configuration of an empty file: every default, no API
// keys, no rules, no actions. It does not read the environment (see ApplyEnv).
func Default() *Config {
	return &Config{
		Listen:              DefaultListen,
		Store:               DefaultStore,
		StoreConnectTimeout: DefaultStoreConnectTimeout,
		AutoMigrate:         DefaultAutoMigrate,
		WebhookSecretEnv:    DefaultWebhookSecretEnv,
		Worker: Worker{
			PollInterval:   DefaultPollInterval,
			Lease:          DefaultLease,
			MaxConcurrency: DefaultMaxConcurrency,
			MaxAttempts:    DefaultMaxAttempts,
		},
		Postgres:   Postgres{MaxConns: DefaultPostgresMaxConns},
		PolicySpec: PolicySpec{DefaultTTL: DefaultTTL},
		Metrics:    Metrics{ProposalCountsEvery: DefaultProposalCountsEvery},
		Events:     Events{MaxStreamsPerActor: DefaultMaxStreamsPerActor},
		Web:        Web{SecureCookies: DefaultSecureCookies},
		Log:        Log{Level: DefaultLogLevel, Format: DefaultLogFormat, Requests: DefaultLogRequests},
		MCP:        MCP{Path: DefaultMCPPath, Hold: DefaultMCPHold},
		Audit:      Audit{CheckpointEvery: DefaultCheckpointEvery},
	}
}

// Policy converts the policy section into the engine's policy.
func (c *Config) Policy() *countersign.Policy {
	p := &countersign.Policy{DefaultTTL: c.PolicySpec.DefaultTTL}
	for _, r := range c.PolicySpec.Rules {
		p.Rules = append(p.Rules, countersign.Rule{
			Match:              r.Match,
			When:               r.When,
			Effect:             r.Effect,
			Approvers:          slices.Clone(r.Approvers),
			Quorum:             r.Quorum,
			ForbidSelfApproval: r.ForbidSelfApproval,
			TTL:                r.TTL,
			Mode:               r.Mode,
			Channels:           slices.Clone(r.Channels),
			Notify:             slices.Clone(r.Notify),
			StepUp:             r.StepUp,
			Remember:           slices.Clone(r.Remember),
			EscalateAfter:      r.EscalateAfter,
			EscalateTo:         slices.Clone(r.EscalateTo),
			RemindEvery:        r.RemindEvery,
		})
	}
	return p
}

// EngineOptions returns the engine options the file decides: the policy,
// the execution lease and the idempotent retry bound. The caller adds the
// store and the actions.
func (c *Config) EngineOptions() countersign.Options {
	return countersign.Options{
		Policy:        c.Policy(),
		LeaseDuration: c.Worker.Lease,
		MaxAttempts:   c.Worker.MaxAttempts,
	}
}

// WorkerOptions returns the worker's options. The sealer's signing key is
// the caller's to read (audit.signing_key_file) and add.
func (c *Config) WorkerOptions() countersign.WorkerOptions {
	return countersign.WorkerOptions{
		PollInterval:   c.Worker.PollInterval,
		LeaseDuration:  c.Worker.Lease,
		MaxConcurrency: c.Worker.MaxConcurrency,
		Sealer:         countersign.SealerOptions{CheckpointEvery: c.Audit.CheckpointEvery},
	}
}

// APIKeys returns a copy of the API keys with KeySHA256 filled in for every
// key, so that a server can match presented tokens by digest alone.
func (c *Config) APIKeys() []APIKey {
	out := make([]APIKey, len(c.Auth.APIKeys))
	for i, k := range c.Auth.APIKeys {
		d := k.Digest()
		k.KeySHA256 = hex.EncodeToString(d[:])
		k.Roles = slices.Clone(k.Roles)
		out[i] = k
	}
	return out
}

// JWT returns a copy of the JWT settings, or nil when JWTs are not accepted.
func (c *Config) JWT() *JWT {
	if c.Auth.JWT == nil {
		return nil
	}
	j := *c.Auth.JWT
	return &j
}

// AllowedOrigins returns the CORS origins.
func (c *Config) AllowedOrigins() []string { return slices.Clone(c.CORS.AllowedOrigins) }

// MetricsRole returns the role /metrics requires, or "" when it is open.
func (c *Config) MetricsRole() string { return c.Metrics.RequireRole }

// TrustedProxies returns web.trusted_proxies parsed. A validated
// configuration holds only prefixes that parse.
func (c *Config) TrustedProxies() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(c.Web.TrustedProxies))
	for _, s := range c.Web.TrustedProxies {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// ErrSecretUnset is wrapped by the errors of WebhookSecret and HS256Secret
// when a secret is not configured or its environment variable is empty.
var ErrSecretUnset = errors.New("secret not set")

// MinHS256SecretBytes is the shortest HS256 secret accepted: RFC 7518 §3.2
// requires a key at least as long as the hash output.
const MinHS256SecretBytes = 32

// WebhookSecret returns the raw value of the environment variable that
// webhook_secret_env names: the key of the signatures on webhook requests.
// It fails, wrapping ErrSecretUnset, when the variable is empty or unset.
// A server with webhook actions needs it; one without does not.
func (c *Config) WebhookSecret() ([]byte, error) {
	return secret("webhook_secret_env", c.WebhookSecretEnv)
}

// HS256Secret returns the raw value of the environment variable that
// auth.jwt.hs256_secret_env names. It fails, wrapping ErrSecretUnset, when
// JWTs are not configured with HS256 or the variable is empty or unset, and
// when the secret is shorter than MinHS256SecretBytes.
func (c *Config) HS256Secret() ([]byte, error) {
	if c.Auth.JWT == nil || c.Auth.JWT.HS256SecretEnv == "" {
		return nil, fmt.Errorf("config: auth.jwt.hs256_secret_env is not configured: %w", ErrSecretUnset)
	}
	s, err := secret("auth.jwt.hs256_secret_env", c.Auth.JWT.HS256SecretEnv)
	if err != nil {
		return nil, err
	}
	if len(s) < MinHS256SecretBytes {
		return nil, fmt.Errorf("config: environment variable %s (auth.jwt.hs256_secret_env) holds %d bytes; HS256 needs at least %d", c.Auth.JWT.HS256SecretEnv, len(s), MinHS256SecretBytes)
	}
	return s, nil
}

func secret(field, name string) ([]byte, error) {
	if name == "" {
		return nil, fmt.Errorf("config: %s is empty: %w", field, ErrSecretUnset)
	}
	v := os.Getenv(name)
	if v == "" {
		return nil, fmt.Errorf("config: environment variable %s (named by %s) is empty or unset: %w", name, field, ErrSecretUnset)
	}
	return []byte(v), nil
}
