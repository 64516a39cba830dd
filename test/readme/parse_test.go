package readme

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// setupCommands returns the commands of the README's set-up block (the
// first sh block after "## Set-up"), comments and blank lines left out.
func setupCommands(readme string) ([]string, error) {
	_, rest, ok := strings.Cut(readme, "\n## Set-up")
	if !ok {
		return nil, errors.New(`README.md has no "## Set-up" section`)
	}
	m := regexp.MustCompile("(?s)```sh\\n(.*?)```").FindStringSubmatch(rest)
	if m == nil {
		return nil, errors.New("README.md's set-up section has no sh block")
	}
	var cmds []string
	for l := range strings.Lines(m[1]) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			cmds = append(cmds, l)
		}
	}
	return cmds, nil
}

// block is a README sh block between <!-- name --> and <!-- /name -->.
type block struct {
	name, script string
}

var opener = regexp.MustCompile(`<!-- ([a-z][a-z0-9-]*) -->`)

// shBlocks returns every marked sh block of the README, in order. A marker
// without its block, or a name used twice, is an error: the test would
// silently run less than the README says it does.
func shBlocks(readme string) ([]block, error) {
	var blocks []block
	seen := map[string]bool{}
	for _, m := range opener.FindAllStringSubmatch(readme, -1) {
		name := m[1]
		if seen[name] {
			return nil, fmt.Errorf("README.md marks two blocks <!-- %s -->", name)
		}
		seen[name] = true
		re := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(name) + " -->\\s*```sh\\n(.*?)```\\s*<!-- /" + regexp.QuoteMeta(name) + " -->")
		b := re.FindStringSubmatch(readme)
		if b == nil {
			return nil, fmt.Errorf("README.md's <!-- %s --> is not followed by a sh block and <!-- /%s -->", name, name)
		}
		blocks = append(blocks, block{name: name, script: b[1]})
	}
	if len(blocks) == 0 {
		return nil, errors.New("README.md marks no sh block")
	}
	return blocks, nil
}

// cliCommands returns the commands of the README's "The same from the
// command line:" paragraph: each code span, its line breaks read as spaces
// (as Markdown renders them).
func cliCommands(readme string) ([]string, error) {
	m := regexp.MustCompile(`(?s)\nThe same from the command line: (.*?)\n\n`).FindStringSubmatch(readme)
	if m == nil {
		return nil, errors.New(`README.md has no "The same from the command line:" paragraph`)
	}
	var cmds []string
	for _, span := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(m[1], -1) {
		cmd := strings.Join(strings.Fields(span[1]), " ")
		if !strings.HasPrefix(cmd, "countersign ") {
			return nil, fmt.Errorf("the command line paragraph's %q is not a countersign command", cmd)
		}
		cmds = append(cmds, cmd)
	}
	if len(cmds) == 0 {
		return nil, errors.New("the command line paragraph names no command")
	}
	return cmds, nil
}

// idPlaceholder is the README's proposal id placeholder, a word of its own.
var idPlaceholder = regexp.MustCompile(`(^|\s)ID(\s|$)`)

// withID replaces the proposal id placeholder of cmd with id.
func withID(cmd, id string) string {
	return idPlaceholder.ReplaceAllString(cmd, "${1}"+id+"${2}")
}

// bannerStart opens the commands the demo prints at start.
const bannerStart = "Try it (bash):\n"

// bannerScript returns the commands the demo's banner prints, as a script:
// the indented lines after "Try it (bash):" up to the blank line.
func bannerScript(banner string) (string, error) {
	_, rest, ok := strings.Cut(banner, bannerStart)
	if !ok {
		return "", fmt.Errorf("the banner has no %q", strings.TrimSpace(bannerStart))
	}
	var lines []string
	for l := range strings.Lines(rest) {
		l = strings.TrimRight(l, "\n")
		if strings.TrimSpace(l) == "" {
			break
		}
		lines = append(lines, strings.TrimPrefix(l, "  "))
	}
	if len(lines) == 0 {
		return "", errors.New("the banner prints no command")
	}
	return strings.Join(lines, "\n") + "\n", nil
}
