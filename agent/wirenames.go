package agent

import (
	"fmt"
	"strings"
)

// maxWireName is the longest function name OpenAI and Anthropic accept.
const maxWireName = 64

// WireNames gives each tool a function name made of [a-zA-Z0-9_-], at most
// 64 bytes, that no other tool of the list has: the action's name with
// every other byte replaced by "_" (so "payments.refund" is
// "payments_refund"), cut to fit, and a "_2", "_3"… suffix where two
// would collide. It returns the names in the tools' order and the table
// from a wire name back to the action's name.
func WireNames(tools []Tool) (names []string, action map[string]string) {
	names = make([]string, len(tools))
	action = make(map[string]string, len(tools))
	for i, t := range tools {
		base := sanitize(t.Name)
		name := base
		for n := 2; ; n++ {
			if _, taken := action[name]; !taken {
				break
			}
			suffix := fmt.Sprintf("_%d", n)
			name = cut(base, maxWireName-len(suffix)) + suffix
		}
		names[i] = name
		action[name] = t.Name
	}
	return names, action
}

func sanitize(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "tool"
	}
	return cut(b.String(), maxWireName)
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
