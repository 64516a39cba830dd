package agent

import (
	"fmt"

	"github.com/countersign/countersign"
)

// DefaultMaxSteps is an agent's model calls per run when its MaxSteps is 0.
const DefaultMaxSteps = 8

// Agent is a configured agent (docs/api.md, Agents): who it is, the model that
// answers for it, and the actions it may offer that model.
type Agent struct {
	// Name names the agent in messages, runs and the AG-UI route.
	Name string
	// Instructions are the model's standing instructions (a system prompt).
	Instructions string
	// Model answers for the agent.
	Model Model
	// Actions are globs over the engine's action names ("payments.*", "*"
	// matching any run of characters, as in policy rules); the
	// model is offered the actions they match that the policy does not
	// deny. Empty: every action.
	Actions []string
	// MaxSteps bounds the model calls of one run (DefaultMaxSteps if 0).
	MaxSteps int
}

// Validate checks what an agent needs before it runs.
func (a *Agent) Validate() error {
	switch {
	case a == nil:
		return fmt.Errorf("agent: nil agent")
	case a.Name == "":
		return fmt.Errorf("agent: a name is required")
	case a.Model == nil:
		return fmt.Errorf("agent %s: a model is required", a.Name)
	case a.MaxSteps < 0:
		return fmt.Errorf("agent %s: max_steps %d is negative", a.Name, a.MaxSteps)
	}
	for _, g := range a.Actions {
		if g == "" {
			return fmt.Errorf("agent %s: actions: an empty glob", a.Name)
		}
	}
	return nil
}

// Offers reports whether the agent's globs take the action named name.
func (a *Agent) Offers(name string) bool {
	if len(a.Actions) == 0 {
		return true
	}
	for _, g := range a.Actions {
		if countersign.MatchGlob(g, name) {
			return true
		}
	}
	return false
}

// Steps is the agent's bound on model calls per run.
func (a *Agent) Steps() int {
	if a.MaxSteps == 0 {
		return DefaultMaxSteps
	}
	return a.MaxSteps
}
