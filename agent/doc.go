// Package agent runs agents inside Countersign: a [Model] (one method: given
// the conversation and the tools, return the assistant's text and tool
// calls), the tool loop over the engine's Call, and the run lifecycle
// (docs/design.md §12, docs/api.md "Agents").
//
// The model providers are subpackages, each on its provider's official SDK:
// agent/openai (chat completions, any OpenAI-compatible endpoint),
// agent/anthropic (messages) and agent/scripted (deterministic, no network:
// tests and the demo). No SDK type crosses into this package or the root
// package: a provider translates [Request] to its wire format and its
// answer back to a [Reply].
//
// # Tool names
//
// Tools are the engine's actions, named like "payments.refund". Providers
// whose wire format restricts function names (OpenAI and Anthropic accept
// [a-zA-Z0-9_-]{1,64}) send [WireNames] and map the model's answer back
// with the same table, so a model can only call a tool it was offered.
package agent
