package docs

import (
	"bytes"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// frozen are tracked files whose text may not change, with the reason. They
// are not checked for references.
var frozen = map[string]string{
	// Released migrations are pinned by their SHA-256 (internal/migrations):
	// editing a comment would fail every database that applied them. Their
	// "§14" is docs/design.md's.
	"store/pgstore/migrations/0008_escalation.sql":     "a released migration",
	"store/sqlitestore/migrations/0009_escalation.sql": "a released migration",
}

var (
	// outside is a path that leaves the repository: the folder the
	// contract was first written in, beside the repository, and the
	// development machine's absolute paths.
	outside = regexp.MustCompile(`\.\./shared\b|/work/[\w.-]+`)
	// mdName is a token that names a Markdown file, URLs included (they
	// are skipped).
	mdName = regexp.MustCompile(`[\w./:%-]*[\w-]\.md\b`)
	// cited are the names a token is checked for: the contract, the design
	// notes and the style notes under any spelling, and any file of docs/
	// named from the root.
	cited = regexp.MustCompile(`(?i)(^|/)(api|design|style)\.md$|^docs/`)
	// linkText is the text of an inline Markdown link, which may name its
	// target as a reader in the linking file's folder sees it: the target
	// is what TestMarkdownLinksResolve checks.
	linkText = regexp.MustCompile(`\[([^\[\]]*)\]\(`)
	// scheme starts an absolute URL.
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// TestNoReferenceOutsideTheRepository reads every tracked text file: none
// may point outside the repository, and a name of the contract, the design
// notes or the style notes in any spelling, or of a docs/ file from the
// root, must be a tracked file, either from the repository's root or from
// the naming file's folder. So the contract and the design notes are cited
// only as docs/api.md and docs/design.md (or by a name relative to the
// citing file's folder), the files a reader has.
func TestNoReferenceOutsideTheRepository(t *testing.T) {
	r := tracked(t)
	checked := 0
	for _, f := range r.files {
		if _, ok := frozen[f]; ok {
			continue
		}
		b, text := read(t, f)
		if !text {
			continue
		}
		checked++
		if strings.HasSuffix(f, ".md") {
			b = bytes.Clone(b)
			for _, m := range linkText.FindAllSubmatchIndex(b, -1) {
				copy(b[m[2]:m[3]], bytes.Repeat([]byte{' '}, m[3]-m[2]))
			}
		}
		for _, loc := range outside.FindAllIndex(b, -1) {
			t.Errorf("%s:%d: %q is a path outside the repository: cite docs/api.md or docs/design.md (or the file in the repository)",
				f, lineOf(b, loc[0]), b[loc[0]:loc[1]])
		}
		for _, loc := range mdName.FindAllIndex(b, -1) {
			name := string(b[loc[0]:loc[1]])
			if strings.Contains(name, "://") || scheme.MatchString(name) {
				continue
			}
			name = strings.TrimLeft(name, ":")
			if !cited.MatchString(name) {
				continue
			}
			if p, ok := resolve(f, name, true); ok && r.set[p] {
				continue
			}
			if p, ok := resolve(f, name, false); ok && r.set[p] {
				continue
			}
			t.Errorf("%s:%d: %q is no file of the repository (the contract is docs/api.md, the design notes docs/design.md)",
				f, lineOf(b, loc[0]), name)
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d text files: the listing is broken", checked)
	}
}

var (
	// inlineCode is a code span, whose text is not a link.
	inlineCode = regexp.MustCompile("`+[^`\n]*`+")
	// linkTarget is the target of an inline link or image: ](target) or
	// ](target "title").
	linkTarget = regexp.MustCompile(`\]\(\s*<?([^()\s<>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refTarget is a reference definition: [name]: target.
	refTarget = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s+<?([^\s<>]+)>?`)
	// htmlTarget is an HTML link or image in Markdown.
	htmlTarget = regexp.MustCompile(`(?:href|src)="([^"]*)"`)
)

// prose returns md with its fenced code blocks and code spans blanked out
// (newlines kept, so offsets keep their lines).
func prose(md []byte) []byte {
	out := bytes.Clone(md)
	blank := func(b []byte) {
		for i := range b {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
	}
	fenced := false
	start := 0
	for start < len(out) {
		end := bytes.IndexByte(out[start:], '\n')
		if end < 0 {
			end = len(out)
		} else {
			end += start
		}
		line := out[start:end]
		if mdFence.Match(line) {
			fenced = !fenced
			blank(line)
		} else if fenced {
			blank(line)
		}
		start = end + 1
	}
	for _, loc := range inlineCode.FindAllIndex(out, -1) {
		blank(out[loc[0]:loc[1]])
	}
	return out
}

// TestMarkdownLinksResolve checks every relative link of every tracked
// Markdown file: its path is a tracked file or folder inside the
// repository, and its #anchor, in a Markdown file, is one of that file's
// headings.
func TestMarkdownLinksResolve(t *testing.T) {
	r := tracked(t)
	anchorsOf := map[string]map[string]bool{}
	headings := func(p string) map[string]bool {
		if a, ok := anchorsOf[p]; ok {
			return a
		}
		b, _ := read(t, p)
		anchorsOf[p] = anchors(b)
		return anchorsOf[p]
	}
	links := 0
	for _, f := range r.files {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		raw, _ := read(t, f)
		b := prose(raw)
		var found [][]int
		for _, re := range []*regexp.Regexp{linkTarget, refTarget, htmlTarget} {
			found = append(found, re.FindAllSubmatchIndex(b, -1)...)
		}
		for _, m := range found {
			target := string(b[m[2]:m[3]])
			at := lineOf(b, m[2])
			if target == "" || scheme.MatchString(target) {
				continue
			}
			links++
			p, frag, _ := strings.Cut(target, "#")
			file := f
			if p != "" {
				unescaped, err := url.PathUnescape(p)
				if err != nil {
					t.Errorf("%s:%d: link %q: %v", f, at, target, err)
					continue
				}
				q, inside := resolve(f, unescaped, false)
				switch {
				case !inside:
					t.Errorf("%s:%d: link %q leaves the repository", f, at, target)
					continue
				case !r.exists(q):
					t.Errorf("%s:%d: link %q: %s is not a tracked file or folder", f, at, target, q)
					continue
				}
				file = q
			}
			if frag != "" && strings.HasSuffix(file, ".md") && r.set[file] && !headings(file)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", f, at, target, file, frag)
			}
		}
	}
	if links < 100 {
		t.Fatalf("found %d relative links: the scan is broken", links)
	}
}
