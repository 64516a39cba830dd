// Package anthropic is an [agent.Model] on Anthropic's Messages API
// (POST /v1/messages), through the official Go SDK. No SDK type leaves
// the package: [Model.Generate] takes an [agent.Request] and returns an
// [agent.Reply] or an error.
//
// # Request
//
//   - The agent's instructions are the "system" prompt.
//   - A user message is a user message holding one text block.
//   - An assistant message holds a text block (when it has text) and one
//     tool_use block per tool call: the call's id, its input object (an
//     empty input is {}), and the wire name of its action.
//   - A tool message is a tool_result block in a user message: tool_use_id
//     is the call it answers, the content is the result object as JSON
//     text (the one-line summary when there is no result).
//   - Messages that land on the same wire role in a row are merged into
//     one wire message, in order. That puts all the results of one
//     assistant turn's calls into the single user message after it, as the
//     API requires, and keeps the roles alternating. A message with nothing
//     to say (no text, no call) is left out.
//   - Each tool is a custom tool: its wire name, its description, and its
//     input schema as given ("type" must be "object" or absent; every other
//     keyword is sent verbatim).
//
// Wire names come from [agent.WireNames] over the request's tools, so
// "payments.refund" is sent as "payments_refund". An action that the
// conversation called earlier but that is no longer offered keeps a wire
// name in the history that no offered tool has.
//
// # Reply
//
// The text blocks, concatenated, are the reply's text; each tool_use block
// is a tool call, its wire name mapped back to the action's name through
// the same table, its input kept as the JSON object it is. Thinking blocks
// are skipped. Everything else is an error that says what was wrong:
// a tool_use naming a tool that was not offered, without an id, with an
// input that is not a JSON object, or with an id used twice; a block of
// another type; a reply with neither text nor a tool call; a stop other
// than end_turn, tool_use or stop_sequence (a refusal, max_tokens, the
// context window). A reply the SDK cannot decode is an error too, never a
// panic.
//
// # Errors and retries
//
// The SDK retries 429s, 5xx answers (529 overloaded included), connection
// errors and tries that exceed [Options].Timeout, with its own backoff, up
// to [Options].MaxRetries times; the caller's context bounds the whole.
// An HTTP error that remains is an [*APIError] with the status, the
// provider's error type and message. Every error text starts with
// "anthropic:" and never holds the API key.
//
// The SDK is told to read nothing from the environment (no ANTHROPIC_*
// variable, profile or federation token): the composition root passes the
// model, the endpoint and the key. With [Options].APIKey set, the SDK sends
// it as "Authorization: Bearer <key>".
package anthropic
