package textdecision

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Vocabulary is a compiled [Config]: the phrases that decide and the
// replies. It is immutable and safe for concurrent use. A nil *Vocabulary
// is the English preset.
type Vocabulary struct {
	language string
	commands map[string]command // phraseKey(phrase) → what it decides
	replies  map[ReplyKey]string
	words    Words // the accepted phrases as written, in order, for Words
}

// command is what a phrase decides.
type command struct {
	verdict  Verdict
	remember bool
}

// english is the default vocabulary, the one a nil *Vocabulary stands for.
var english = mustNew(Config{})

// New validates cfg and compiles it. The error lists every problem, each a
// [*FieldError].
func New(cfg Config) (*Vocabulary, error) { return build(cfg) }

func mustNew(cfg Config) *Vocabulary {
	v, err := New(cfg)
	if err != nil {
		panic("textdecision: preset: " + err.Error())
	}
	return v
}

// Language returns the preset's language: [English] or
// [BrazilianPortuguese].
func (v *Vocabulary) Language() string {
	if v == nil {
		return English
	}
	return v.language
}

// Words returns the phrases that decide, as configured or as the preset
// writes them, the language's first and then English's (which every
// language accepts), without repeats: what a person may be told to answer.
func (v *Vocabulary) Words() Words {
	if v == nil {
		v = english
	}
	return Words{
		Approve:  append([]string(nil), v.words.Approve...),
		Reject:   append([]string(nil), v.words.Reject...),
		Remember: append([]string(nil), v.words.Remember...),
	}
}

// phraseKey is the form phrases are compared in: canonical caseless
// (NFD, full case folding, then NFC, so composed and decomposed letters
// compare equal) with every run of blanks made one space. It does not trim:
// a blank left at an end keeps the text from matching.
func phraseKey(s string) string {
	// A Caser is stateful, so each call makes its own.
	s = norm.NFC.String(cases.Fold().String(norm.NFD.String(s)))
	var b strings.Builder
	b.Grow(len(s))
	blank := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			if !blank {
				b.WriteByte(' ')
			}
			blank = true
			continue
		}
		blank = false
		b.WriteRune(r)
	}
	return b.String()
}

// isLineBreak reports the runes Unicode makes mandatory line breaks.
func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}
