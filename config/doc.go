// Package config reads Countersign's server configuration: a YAML file
// (API.md, Configuration) in which every field has a default.
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
//	webhook_secret_env: COUNTERSIGN_WEBHOOK_SECRET
//	worker: {poll_interval: 1s, lease: 30s, max_concurrency: 4, max_attempts: 5}
//	policy:
//	  default_ttl: 10m
//	  rules:
//	    - match: "payments.*"             # an action name, or a glob
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
// them). The checks on rules and actions are the engine's own (a policy that
// passes is accepted by countersign.New, an action by
// countersign.NewRawAction), plus some the engine cannot make: a quorum that
// the named approvers could never meet, a rule that repeats another's match,
// a placeholder naming no property of a closed input schema. Anchors,
// aliases and merge keys (<<: *defaults) work as in any YAML.
//
// # Environment
//
// The environment overrides the deployment settings: COUNTERSIGN_LISTEN
// replaces listen and COUNTERSIGN_STORE replaces store ([Config.ApplyEnv],
// which [Load] calls; [Parse] and [Default] read no environment). A command
// line flag beats both ([Config.SetListen], [Config.SetStore]).
//
// Secrets never live in the file: it names the environment variables that
// hold them. [Config.WebhookSecret] reads the variable webhook_secret_env
// names, [Config.HS256Secret] the one auth.jwt.hs256_secret_env names; each
// fails clearly when its variable is empty. They are read when asked for,
// so that `countersign config validate` can check a file anywhere.
//
// # Use
//
// [Config.Policy], [Config.EngineOptions] and [Config.WorkerOptions] give the
// engine's and the worker's options; [Config.APIKeys], [Config.JWT],
// [Config.AllowedOrigins], [Config.MetricsRole] and [Config.TrustedProxies]
// what a server authenticates and exposes with; [Log.Logger] and
// [Log.RequestLevel] how it logs. Actions stay descriptions ([Action]); the
// webhook package turns them into countersign actions.
package config
