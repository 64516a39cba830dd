package config

import (
	"errors"

	"github.com/countersign/countersign/agent"
)

// newProviderModel builds an openai or anthropic model. TEMPORARY stub
// until agent/openai and agent/anthropic land on main.
func newProviderModel(m *ModelSpec, key string) (agent.Model, error) {
	return nil, errors.New("not yet")
}
