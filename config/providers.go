package config

import (
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/anthropic"
	"github.com/countersign/countersign/agent/openai"
)

// newProviderModel builds a checked openai or anthropic model section with
// its key. Neither provider reads an environment variable of its own:
// where requests go and what they carry come from the file and the one
// variable it names.
func newProviderModel(m *ModelSpec, key string) (agent.Model, error) {
	// Each branch returns its own nil on error: a nil *Model in an
	// agent.Model would not be a nil agent.Model.
	switch m.Provider {
	case ProviderOpenAI:
		model, err := openai.New(openai.Options{Model: m.Name, BaseURL: m.BaseURL, APIKey: key})
		if err != nil {
			return nil, err
		}
		return model, nil
	default:
		model, err := anthropic.New(anthropic.Options{Model: m.Name, BaseURL: m.BaseURL, APIKey: key})
		if err != nil {
			return nil, err
		}
		return model, nil
	}
}
