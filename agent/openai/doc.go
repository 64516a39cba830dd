// Package openai is an [agent.Model] on a chat-completions endpoint: OpenAI's
// own API or any server that speaks its wire format (a local Ollama or
// vLLM, a gateway), through the official SDK, github.com/openai/openai-go/v3.
// No SDK type leaves the package: callers see [Options], [Model] and the
// agent package's types only.
//
// # The request
//
// One [Model.Generate] is one POST of {base URL}/chat/completions:
//
//   - The agent's instructions are the first message, role "system" (not
//     "developer", which only OpenAI's own API knows).
//   - A user message is a "user" message with its text.
//   - An assistant message is an "assistant" message with its text and its
//     tool_calls: each call's id, the function name of its action (below),
//     and its input JSON as the arguments string ("{}" when empty). Its
//     content is left out when it only calls tools.
//   - A tool message is a "tool" message with tool_call_id and, as content,
//     the result JSON (its one-line summary when it has no result).
//   - Each tool is a function tool: the action's function name, its
//     description, and its input JSON Schema as the parameters, sent as
//     written.
//
// # Function names
//
// OpenAI accepts function names of [a-zA-Z0-9_-]{1,64}, so a tool goes by
// the name [agent.WireNames] gives it ("payments.refund" is
// "payments_refund"), and a tool call in the reply is mapped back to its
// action through the same table. An action that an earlier assistant
// message called but that is no longer offered is still named in the
// history (after the offered tools, so their names do not change), and is
// not in the table: the model can call only what it was offered.
//
// # The reply
//
// The first choice's text and tool calls become the [agent.Reply]. Anything
// that cannot be mapped back faithfully is an error that says what was
// wrong, never a panic: no choice or no message, a refusal, a reply cut off
// at the token limit or withheld by the content filter, content that is not
// a string, a tool call without an id or with an id used twice, a call of a
// function that was not offered, arguments that are not one JSON object (an
// empty string is {}; arguments sent as a JSON object instead of a string
// are taken as they are), or a status outside 2xx.
//
// # Errors, retries and timeouts
//
// The SDK retries 408, 409, 429, 5xx and connection errors with its own
// backoff (honouring Retry-After), [Options.MaxRetries] times; each attempt
// is bounded by [Options.Timeout], the whole call by the caller's context.
// An error the endpoint answers with reads "openai: chat completion: HTTP
// 429 Too Many Requests: <the provider's message> (<its code>)" and unwraps
// to the SDK's error. No error text carries the API key: a provider that
// echoes it back has it replaced by "[redacted]".
//
// The client is built from the configuration alone: unlike the SDK's
// NewClient, it does not read OPENAI_API_KEY, OPENAI_BASE_URL or the other
// OPENAI_* variables, so a key meant for one endpoint never reaches another.
// The composition root reads the key from the variable the agent's
// api_key_env names and passes it as [Options.APIKey].
package openai
