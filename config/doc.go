// Package config reads Countersign's server configuration: a YAML file
// (docs/api.md, Configuration) in which every field has a default.
//
//	listen: 127.0.0.1:8080                # host:port
//	store: sqlite:countersign.db          # sqlite:PATH (relative to the working directory),
//	                                      # or postgres://user@host:5432/db
//	auto_migrate: true                    # serve applies pending migrations at boot
//	auth:
//	  api_keys:                           # static bearer tokens
//	    - {key: ck_dev_alice, tenant: acme, actor: alice, roles: [agent]}
//	    - {key_sha256: 9f86d0…, tenant: acme, actor: bob, roles: [finance, operator]}
//	  jwt:                                # optional; issuer and audience required,
//	    issuer: https://auth.example.com/ # and exactly one of jwks_file and
//	    audience: countersign             # hs256_secret_env
//	    jwks_file: jwks.json              # relative to the working directory
//	    hs256_secret_env: JWT_SECRET      # names the variable holding the secret
//	    claims: {tenant: tid, actor: sub, roles: roles}
//	cors: {allowed_origins: []}           # origins such as https://inbox.example.com, or *
//	webhook_secret_env: COUNTERSIGN_WEBHOOK_SECRET   # signs the actions that name none of their own
//	worker: {poll_interval: 1s, lease: 30s, max_concurrency: 4, max_attempts: 5}
//	policy:
//	  default_ttl: 10m
//	  rules:
//	    - match: "payments.*"             # an action name, or a glob
//	      when: "input.amount > 1000"     # optional: a CEL condition (see docs/configuration.md)
//	      effect: ask                     # allow | ask (default) | deny
//	      approvers: ["role:finance"]     # requester (default) | role:NAME | actor:ID
//	      quorum: 1
//	      forbid_self_approval: true
//	      ttl: 10m                        # default: policy.default_ttl
//	      mode: independent               # wait (default) | two_phase | independent
//	      channels: [api, web, cli, text] # default: every channel
//	      remember: [run, thread]         # default: none
//	actions:                              # webhook actions
//	  - name: payments.refund
//	    version: "1"                      # default "1"
//	    kind: write                       # read | write (default)
//	    description: Refund a payment
//	    input_schema: {type: object}      # a JSON Schema written in YAML; default {type: object}
//	    confirmation: {title: "Refund {amount} to {customer}", verb: Refund}
//	    replacement_key: "{customer}"
//	    idempotent: false
//	    webhook_secret_env: PAYMENTS_WEBHOOK_SECRET   # optional: this backend's own secret
//	    prepare:   {url: http://127.0.0.1:9100/prepare,   timeout: 5s}  # optional
//	    execute:   {url: http://127.0.0.1:9100/execute,   timeout: 10s} # required
//	    reconcile: {url: http://127.0.0.1:9100/reconcile, timeout: 5s}  # optional
//	metrics:
//	  require_role: operator              # default: /metrics is open
//	  proposal_counts_every: 30s          # how often countersign_proposals is recounted
//	events: {max_streams_per_actor: 8}    # open event streams per actor and process
//	web:                                  # the approver's inbox
//	  secure_cookies: auto                # auto | always | never
//	  trusted_proxies: [10.0.0.0/8]       # CIDR prefixes whose X-Forwarded-Proto is believed
//	log:
//	  level: info                         # debug | info (default) | warn | error
//	  format: text                        # text (default) | json
//	  requests: true                      # false: each request's line at debug, not info
//	text_decisions:                       # what a human may type in a conversation to decide
//	  language: pt-BR                     # en (default) | pt-BR; English commands work in both
//	  vocabulary: {approve: [sim], reject: [não], remember: [sempre nesta conversa]}
//	                                      # each list replaces the preset's phrases of its kind
//	  replies: {approved: "…", approved_queued: "…", rejected: "…", unchanged: "…",
//	            conflict: "…", expired: "…", ambiguous: "… {ids} …"}   # default: the language's
//	default_agent: support                # the agent of a message naming none; default: none
//	agents:
//	  - name: support                     # [A-Za-z0-9_.-], at most 64, unique: a URL path segment
//	    instructions: "You help customers of ACME. Use the tools."
//	    model:
//	      provider: openai                # openai | anthropic | scripted
//	      name: gpt-4.1-mini              # required for openai and anthropic
//	      base_url: http://127.0.0.1:11434/v1   # optional; http or https
//	      api_key_env: OPENAI_API_KEY     # names the variable; required for openai and anthropic without a base_url
//	    actions: ["payments.*", "crm.lookup"]  # globs; default: every action
//	    max_steps: 8                      # model calls per run; default 8 (0 means it too)
//	  - name: demo
//	    model:
//	      provider: scripted              # no network: rules answer (see agent/scripted)
//	      rules:
//	        - match: '(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)'
//	          say: "I'll ask for that refund."
//	          call: {action: payments.refund, input: '{"amount": {amount}, "customer": "{customer}"}'}
//	        - match: '.*'
//	          say: "I can refund payments."
//	      after_tool: "{summary}"
//	notifications:
//	  - url: https://hooks.internal/countersign
//	    events: [proposal.created, proposal.settled]
//	    secret_env: NOTIFY_SECRET         # required: this receiver's own secret
//	audit:                                # signed checkpoints of the audit chain (docs/audit.md)
//	  signing_key_file: /etc/countersign/audit-ed25519.pem  # PKCS#8 Ed25519, mode 0600; default: none
//	  checkpoint_every: 1m                # how often every tenant's chain is signed; at least 1s
//
// Durations are Go durations ("1s", "10m", "1h30m") and must be positive.
// Hook timeouts default to 10s. The defaults are exported constants, and
// [Default] is the configuration of an empty file.
//
// # Strictness and errors
//
// [Parse] and [Load] refuse an unknown key, a repeated key, a value of the
// wrong type (a string is written as one: version: "1", not version: 1) and
// any invalid value, and report every problem at once. Each is an [*Error]
// whose message reads "file:line: path: reason", with the line of the
// offending YAML node; several are joined with errors.Join ([Errors] lists
// them). The policy is checked by the engine's own check,
// countersign.Policy.Validate, the one that countersign.New makes: each of
// its problems (an *countersign.InvalidPolicyError, which names the rule,
// the field and the list item) is reported at that field's line, so a file
// that loads holds a policy the engine takes and a policy the engine
// refuses does not load. That check refuses, beside each field's form, a
// rule that repeats the match of an earlier one without a when (it could
// never apply), and an ask rule that no one could complete: its approvers,
// with those escalate_to adds, name no role, and the people they name are
// fewer than the quorum, or none at all when forbid_self_approval leaves
// only the requester. Before it come the checks of what only a file can
// write (a file's fields hold their defaults resolved, so quorum: 0 and an
// explicit empty approvers, channels or escalate_to are mistakes, where in
// Go zero means the default), and after it the check that needs the file's
// actions: a when must compile against the input schema of every action its
// match fits, as the engine checks when the action registers. Actions are
// checked as countersign.NewRawAction builds them, plus a placeholder
// naming no property of a closed input schema. Anchors, aliases and merge
// keys (<<: *defaults) work as in any YAML.
//
// # Agents and text decisions
//
// The text_decisions section is checked as the textdecision package
// compiles it, and the rules of a scripted model as agent/scripted builds
// them; each of their problems is placed at its field's line
// ("agents[1].model.rules[0].call.input"). A model section holds only the
// fields of its provider: name, base_url and api_key_env for openai and
// anthropic, rules and after_tool for scripted. api_key_env must be the
// name of a variable: a value that looks like a key (sk-…, or a long run
// of mixed letters and digits) is refused without being repeated. A model
// with a base_url may leave it out (a local server that wants no key).
//
// An agent's actions are globs, "*" standing for any run of characters as
// in policy rules. When the file configures actions, each glob must match
// one of them and each scripted call must name one; a file without actions
// says nothing about the actions a program registers itself (the demo's,
// say), so then globs are checked only for their form. A scripted call
// must also name an action the agent's globs take, or the model could
// never make it. default_agent, when set, must name an agent.
//
// # MCP gateway
//
// The mcp section names the upstream MCP servers whose tools the gateway
// re-exports as the actions <name>__<tool> ([MCP], [MCPServer]): each is a
// command (stdio, with env added to a few basic variables) or a streamable
// HTTP url (with headers_env naming the variables that hold its headers'
// values, read by [MCPServer.Headers]; a url holds no credentials). Names
// are letters and digits with single - or _ between them, so that a
// policy rule's match (fs__*, fs__read_*) splits one way. path must not
// shadow the API's or the inbox's routes; hold is at most [MaxMCPHold].
//
// # Environment
//
// The environment overrides the deployment settings: COUNTERSIGN_LISTEN
// replaces listen and COUNTERSIGN_STORE replaces store ([Config.ApplyEnv],
// which [Load] calls; [Parse] and [Default] read no environment). A command
// line flag beats both ([Config.SetListen], [Config.SetStore]).
//
// Secrets never live in the file: it names the environment variables that
// hold them. [Config.ActionWebhookSecret] reads the variable that signs an
// action's webhook requests (its own webhook_secret_env, or the top-level
// one: [Config.WebhookSecret]), [Config.NotificationSecret] a notification
// target's secret_env, [Config.HS256Secret] auth.jwt.hs256_secret_env; each
// fails clearly when its variable is empty. The composition root
// (cmd/countersign) reads the variables the agents' api_key_env name when it
// builds their models, and reports a missing one at its line
// ([Config.FieldError]). [Parse] reads none of them, so a file can be checked anywhere; it does
// refuse a notification target without secret_env, and two fields naming
// one variable when their secrets must differ.
// They are read when asked for, so that `countersign config validate` can
// check a file anywhere. So is audit.signing_key_file: serve and worker
// read the key, and refuse one that is unreadable, not a PKCS#8 Ed25519
// key, or readable by group or others.
//
// [Config.CheckSecrets] reads them all, as serve does at start and
// `countersign config validate` does unless told --no-env: a secret serve
// needs must be set, each notification target's secret must differ from
// every other secret the file names (API keys, the JWT secret, models' keys
// and MCP headers included), and a webhook secret from every secret but the
// same variable's. A receiver holding a webhook secret could sign execute
// requests its backends obey; a backend holding the JWT secret could mint
// tokens.
//
// URLs (actions' endpoints, notification targets) are written in RFC 3986's
// characters, without userinfo; a token in a query is allowed, and every
// error and log line shows it REDACTED.
//
// # Use
//
// [Config.Policy], [Config.EngineOptions] and [Config.WorkerOptions] give the
// engine's and the worker's options; [Config.APIKeys], [Config.JWT],
// [Config.AllowedOrigins], [Config.MetricsRole] and [Config.TrustedProxies]
// what a server authenticates and exposes with; [Log.Logger] and
// [Log.RequestLevel] how it logs. Actions stay descriptions ([Action]); the
// webhook package turns them into countersign actions.
// [Config.TextVocabulary] compiles the text decisions, and
// [Config.DefaultAgentName] names the agent a message naming none goes to.
//
// # What config builds: nothing
//
// config parses and validates; the composition root, cmd/countersign,
// builds what a configuration describes (the store, the agents with their
// models, the MCP gateway's upstreams, the notification deliverer), so that
// config depends on no store driver, model provider or its SDK, and no
// package that serves or calls over the network. Its imports beyond the
// standard library are these, and a test (TestImports) holds it to them:
//
//	github.com/countersign/countersign                     the engine's types; Policy.Validate; NewRawAction
//	github.com/countersign/countersign/agent               DefaultMaxSteps; Agent.Offers (no network)
//	github.com/countersign/countersign/agent/scripted      a scripted model's rules, checked as scripted.New compiles them
//	github.com/countersign/countersign/internal/condition  a when against an action's input schema
//	github.com/countersign/countersign/internal/defaults   the defaults config shares with pgstore, mcpgateway, notifications
//	github.com/countersign/countersign/internal/mcpname    the MCP gateway's name rules
//	github.com/countersign/countersign/internal/redact     URLs in errors
//	github.com/countersign/countersign/internal/schema     actions' input schemas
//	github.com/countersign/countersign/textdecision        text_decisions
//	go.yaml.in/yaml/v3                                     the file
//
// agent/scripted is a model, but a pure one: its rules are regular
// expressions and templates, compiled with no I/O, so config checks a
// file's scripted rules with the very compiler the model uses.
package config
