// Package mcpname holds the rules for the names the MCP gateway exports:
// an upstream server's and an upstream tool's, which make the action
// <server>__<tool>. The gateway applies them, and package config checks a
// file's mcp section with them, without importing the gateway (and with it
// the MCP SDK and the network).
package mcpname

import "regexp"

// MaxUpstream is the longest upstream server's name, leaving most of an
// action name's 128 bytes to the tool.
const MaxUpstream = 64

// upstream is what a server's name may be: letters and digits with single
// - or _ between them, so that <server>__<tool> splits one way only.
var upstream = regexp.MustCompile(`^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$`)

// ValidUpstream reports whether name can name an upstream server: up to
// MaxUpstream letters and digits, with single - or _ between them.
func ValidUpstream(name string) bool {
	return len(name) <= MaxUpstream && upstream.MatchString(name)
}

// tool is what an MCP tool name may be (1 to 128 of letters, digits, _ -
// and .), which is also what an action name allows.
var tool = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// ValidTool reports whether name can be an upstream tool's name: 1 to 128
// of letters, digits, _, - and dots.
func ValidTool(name string) bool { return tool.MatchString(name) }
