package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"unicode"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/anthropic"
	"github.com/countersign/countersign/agent/openai"
	"github.com/countersign/countersign/agent/scripted"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/mcpgateway"
	"go.opentelemetry.io/otel/trace"
)

// This file builds what a configuration describes and package config only
// parses and checks: the agents with their models (and so the providers'
// SDKs) and the MCP gateway's upstreams. config depends on no driver,
// provider SDK or network-facing package; the composition root does.

// configuredAgents builds cfg's agents, in file order, each with its
// model: a scripted model from its rules; an openai or anthropic model with
// the API key read, through getenv (os.Getenv when nil), from the variable
// its api_key_env names (none without api_key_env, which config allows only
// with a base_url: no key is sent). A variable that is empty or unset is an error
// naming it and wrapping config.ErrSecretUnset; no error repeats a key.
// Every problem is reported, each a *config.Error at its field's line,
// several joined. It makes no request: a wrong key shows at the first run.
// serve (and config validate, which builds what serve builds) calls it
// once at start-up, so that a missing key fails the start rather than a
// run.
func configuredAgents(cfg *config.Config, getenv func(string) string) ([]*agent.Agent, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	// A configuration built in code may not have been checked: nothing is
	// built from one that fails.
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var errs []error
	out := make([]*agent.Agent, 0, len(cfg.Agents))
	for i := range cfg.Agents {
		spec := &cfg.Agents[i]
		p := fmt.Sprintf("agents[%d]", i)
		m, err := agentModel(cfg, p+".model", &spec.Model, getenv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a := &agent.Agent{
			Name:         spec.Name,
			Instructions: spec.Instructions,
			Model:        m,
			Actions:      slices.Clone(spec.Actions),
			MaxSteps:     spec.MaxSteps,
		}
		// What passed config's checks must pass the runtime's: should the
		// two ever disagree, the start fails here, at the agent.
		if err := a.Validate(); err != nil {
			errs = append(errs, cfg.FieldError(p, err, err.Error()))
			continue
		}
		out = append(out, a)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// agentModel builds a checked model section, with its key for a provider.
// Neither provider reads an environment variable of its own: where
// requests go and what they carry come from the file and the one variable
// it names.
func agentModel(cfg *config.Config, path string, m *config.ModelSpec, getenv func(string) string) (agent.Model, error) {
	if m.Provider == config.ProviderScripted {
		sm, err := scripted.New(m.Scripted)
		if err != nil {
			return nil, cfg.FieldError(path, err, err.Error())
		}
		return sm, nil
	}
	// No api_key_env (config allows it only with a base_url): no key.
	var key string
	if m.APIKeyEnv != "" {
		key = getenv(m.APIKeyEnv)
		switch {
		case key == "":
			return nil, cfg.FieldError(path+".api_key_env", config.ErrSecretUnset,
				fmt.Sprintf("environment variable %s is empty or unset: it must hold the %s API key", m.APIKeyEnv, m.Provider))
		case strings.ContainsFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
			return nil, cfg.FieldError(path+".api_key_env", nil,
				fmt.Sprintf("environment variable %s holds spaces or control characters, which no API key has", m.APIKeyEnv))
		}
	}
	// Each branch returns its own nil on error: a nil *Model in an
	// agent.Model would not be a nil agent.Model.
	switch m.Provider {
	case config.ProviderOpenAI:
		model, err := openai.New(openai.Options{Model: m.Name, BaseURL: m.BaseURL, APIKey: key})
		if err != nil {
			return nil, cfg.FieldError(path, err, err.Error())
		}
		return model, nil
	case config.ProviderAnthropic:
		model, err := anthropic.New(anthropic.Options{Model: m.Name, BaseURL: m.BaseURL, APIKey: key})
		if err != nil {
			return nil, cfg.FieldError(path, err, err.Error())
		}
		return model, nil
	}
	// Validate refuses any other provider; should it not, neither does this.
	return nil, cfg.FieldError(path+".provider", nil, fmt.Sprintf("%q: want openai, anthropic or scripted", m.Provider))
}

// mcpUpstream returns the gateway's upstream for the configuration's
// server s, with the headers of an HTTP server read through getenv (see
// config.MCPServer.Headers).
func mcpUpstream(s config.MCPServer, getenv func(string) string, tp trace.TracerProvider) (mcpgateway.Upstream, error) {
	var u mcpgateway.Upstream
	if s.URL == "" {
		u = mcpgateway.CommandUpstream(s.Name, s.Command, s.Env)
	} else {
		h, err := s.Headers(getenv)
		if err != nil {
			return mcpgateway.Upstream{}, err
		}
		u = mcpgateway.TracedHTTPUpstream(s.Name, s.URL, h, tp)
	}
	for _, ro := range s.ReadOnly {
		u.ReadOnly = append(u.ReadOnly, mcpgateway.ReadOnlyTool{Name: ro.Name, SchemaSHA256: ro.SchemaSHA256})
	}
	u.Idempotent = append([]string(nil), s.Idempotent...)
	u.TrustAnnotations = s.TrustAnnotations
	return u, nil
}
