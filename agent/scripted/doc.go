// Package scripted is a deterministic [agent.Model] with no network, for
// tests and the demo: the agent's configuration holds rules, and the first
// rule whose regexp matches the latest user message gives the reply.
//
//	model:
//	  provider: scripted
//	  rules:
//	    - match: '(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)'
//	      say: "I'll ask for that refund."
//	      call: {action: payments.refund, input: '{"amount": {amount}, "customer": "{customer}"}'}
//	    - match: '.*'
//	      say: "I can refund payments."
//	  after_tool: "{summary}"
//
// [Config] is that section (it carries yaml and json tags); [New] checks it
// and fails on a rule that could never answer, naming the field
// ("rules[0].call.input") in a [*ConfigError].
//
// # Replies
//
// A conversation whose last message is a tool result is answered with
// after_tool, "{summary}" replaced by the result's one-line summary: the
// model never calls a second tool in one turn. Otherwise the latest user
// message is matched against each rule in order (unanchored, like
// regexp.MatchString); the first match answers with its say text and, if
// it has a call, one tool call. The call's input is the rule's template
// with each {name} replaced by the text of the match's group of that name,
// escaped as the inside of a JSON string: inside quotes that text cannot
// end its string, whatever the user typed, and unquoted it is inserted as
// JSON (so {amount} from \d+ is a number). The result must be a JSON object
// the engine accepts (no duplicate keys, numbers a double can hold); it is
// returned in canonical form, so the same message always yields the same
// bytes.
//
// # Determinism
//
// Nothing depends on time or the network: the same conversation gets the
// same text, action and input bytes. Only a tool call's ID is random:
// "call_" and 96 random bits (24 hex digits, agent.NewToolCallID), unique
// in its thread. The ID is the proposal's tool_call_id and the AG-UI
// toolCallId as it is, and the runtime refuses (TOOL_CALL_ID_REUSED) an id
// an earlier call of the thread used, so an ID that a replayed
// conversation repeated would be refused. A run does not need its model
// to repeat itself: every reply is stored before its calls are made, and a
// run that goes on after a crash answers the stored calls.
//
// # Failures
//
// A message no rule matches is [ErrNoRuleMatches], not an empty reply: a
// script should cover what it is sent, and a last rule matching '.*' is the
// way to say what to answer otherwise. A rule whose action is not among the
// request's tools (the policy denies it, or the agent does not offer it) is
// an error naming the action, as a real model's call of a tool it was not
// offered would be. Errors never repeat the user's message (a JSON syntax
// error names at most the one byte it stopped at).
package scripted
