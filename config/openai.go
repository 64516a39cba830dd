package config

import (
	"errors"

	"github.com/countersign/countersign/agent"
)

// newOpenAIModel: TEMPORARY until agent/openai lands on main.
func newOpenAIModel(m *ModelSpec, key string) (agent.Model, error) {
	return nil, errors.New("openai: not built yet")
}
