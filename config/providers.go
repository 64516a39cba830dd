package config

import (
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/anthropic"
)

// newProviderModel builds a checked openai or anthropic model section with
// its key. The providers read no environment of their own: where requests
// go and what they carry come from the file and the variable it names.
func newProviderModel(m *ModelSpec, key string) (agent.Model, error) {
	if m.Provider == ProviderOpenAI {
		return newOpenAIModel(m, key)
	}
	model, err := anthropic.New(anthropic.Options{Model: m.Name, BaseURL: m.BaseURL, APIKey: key})
	if err != nil {
		return nil, err // a nil *Model is not a nil agent.Model
	}
	return model, nil
}
