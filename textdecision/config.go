package textdecision

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Config is the text_decisions block of the server's configuration. Its
// zero value is the English preset.
type Config struct {
	// Language picks the preset: [English] ("en", the default when empty)
	// or [BrazilianPortuguese] ("pt-BR"), compared case-insensitively.
	Language string `yaml:"language,omitempty" json:"language,omitempty"`
	// Vocabulary replaces the preset's phrases of each kind it names.
	Vocabulary Words `yaml:"vocabulary,omitempty" json:"vocabulary,omitzero"`
	// Replies replaces the language's default answers it names.
	Replies Replies `yaml:"replies,omitempty" json:"replies,omitzero"`
}

// Words lists phrases by the decision they make. A nil list keeps the
// preset's phrases of its kind; a list replaces them (an empty one is an
// error: leave the field out instead).
type Words struct {
	// Approve lists the phrases that approve.
	Approve []string `yaml:"approve,omitempty" json:"approve,omitempty"`
	// Reject lists the phrases that reject.
	Reject []string `yaml:"reject,omitempty" json:"reject,omitempty"`
	// Remember lists the phrases that approve and remember the approval for
	// the thread (a grant of scope "thread").
	Remember []string `yaml:"remember,omitempty" json:"remember,omitempty"`
}

// Replies are the texts answered to a text decision, one per [ReplyKey].
// An empty field is the language's default.
type Replies struct {
	Approved       string `yaml:"approved,omitempty" json:"approved,omitempty"`
	ApprovedQueued string `yaml:"approved_queued,omitempty" json:"approved_queued,omitempty"`
	Rejected       string `yaml:"rejected,omitempty" json:"rejected,omitempty"`
	Unchanged      string `yaml:"unchanged,omitempty" json:"unchanged,omitempty"`
	Conflict       string `yaml:"conflict,omitempty" json:"conflict,omitempty"`
	Expired        string `yaml:"expired,omitempty" json:"expired,omitempty"`
	// Ambiguous must contain "{ids}", where the pending proposals' ids go.
	Ambiguous string `yaml:"ambiguous,omitempty" json:"ambiguous,omitempty"`
}

// FieldError is one problem of a [Config]. Validate and New return one, or
// several joined with errors.Join; errors.As finds the first.
type FieldError struct {
	// Field is the field's path inside the text_decisions block, by its
	// YAML names: "language", "vocabulary.reject[2]", "replies.ambiguous".
	// The server's configuration loader prefixes "text_decisions." to find
	// the line.
	Field string
	// Reason says what is wrong, without the field.
	Reason string
}

// Error reads "text_decisions.FIELD: REASON".
func (e *FieldError) Error() string { return "text_decisions." + e.Field + ": " + e.Reason }

// Validate checks c the way [New] does, reporting every problem.
func (c Config) Validate() error {
	_, err := build(c)
	return err
}

// wordKind is the decision a phrase makes.
type wordKind int

const (
	approveWord wordKind = iota
	rejectWord
	rememberWord
)

var wordKinds = [...]wordKind{approveWord, rejectWord, rememberWord}

// String is the kind's field name under vocabulary.
func (k wordKind) String() string {
	return [...]string{"approve", "reject", "remember"}[k]
}

// verb says what a phrase of kind k does, for errors.
func (k wordKind) verb() string {
	return [...]string{"approves", "rejects", "approves and remembers"}[k]
}

func (k wordKind) command() command {
	switch k {
	case rejectWord:
		return command{verdict: Reject}
	case rememberWord:
		return command{verdict: Approve, remember: true}
	}
	return command{verdict: Approve}
}

func (w Words) of(k wordKind) []string {
	return [...][]string{w.Approve, w.Reject, w.Remember}[k]
}

// origin says where a phrase came from, for the error naming a clash.
type origin struct {
	kind   wordKind
	field  string // "vocabulary.approve[0]"; empty for a preset's phrase
	preset string // the preset's language when field is empty
}

// build validates cfg and compiles it. It keeps going after a problem so
// that one pass reports them all.
func build(cfg Config) (*Vocabulary, error) {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}

	lang, ok := canonicalLanguage(cfg.Language)
	if !ok {
		fail("language", "unknown language %q (want %s or %s)", cfg.Language, English, BrazilianPortuguese)
		lang = English // judge the rest against the default
	}
	p := presets[lang]
	v := &Vocabulary{language: lang, commands: map[string]command{}, replies: map[ReplyKey]string{}}

	// meaning holds every preset phrase of the language and of English,
	// replaced or not: a configuration may drop a preset phrase by replacing
	// its kind, but never give it another meaning ("yes" never rejects).
	meaning := map[string]origin{}
	for _, l := range []string{lang, English} {
		for _, k := range wordKinds {
			for _, w := range presets[l].words.of(k) {
				key := phraseKey(w)
				if _, dup := meaning[key]; !dup {
					meaning[key] = origin{kind: k, preset: l}
				}
			}
		}
	}

	seen := map[string]origin{} // the phrases accepted so far
	accept := func(key string, o origin) {
		seen[key] = o
		v.commands[key] = o.kind.command()
	}
	for _, k := range wordKinds {
		if cfg.Vocabulary.of(k) == nil {
			for _, w := range p.words.of(k) {
				accept(phraseKey(w), origin{kind: k, preset: lang})
			}
		}
		if lang != English {
			for _, w := range presets[English].words.of(k) {
				accept(phraseKey(w), origin{kind: k, preset: English})
			}
		}
	}
	for _, k := range wordKinds {
		words := cfg.Vocabulary.of(k)
		list := "vocabulary." + k.String()
		if words != nil && len(words) == 0 {
			fail(list, "empty list: leave the field out to keep the preset's phrases")
		}
		for i, w := range words {
			field := fmt.Sprintf("%s[%d]", list, i)
			if reason := checkPhrase(w); reason != "" {
				fail(field, "%q: %s", w, reason)
				continue
			}
			key := phraseKey(strings.TrimSpace(w))
			if o, ok := meaning[key]; ok && o.kind != k {
				if o.preset == lang {
					fail(field, "%q %s in the %s preset; no configuration gives it another meaning", w, o.kind.verb(), lang)
				} else {
					fail(field, "%q %s in English, which every language accepts; no configuration gives it another meaning", w, o.kind.verb())
				}
				continue
			}
			if o, ok := seen[key]; ok {
				if o.kind != k { // o is configured: the preset ones were caught above
					fail(field, "%q already %s (%s)", w, o.kind.verb(), o.field)
				}
				continue // a repeat, or a preset phrase listed again: harmless
			}
			accept(key, origin{kind: k, field: field})
		}
	}

	// The phrases as people are told them (Words): the configured ones
	// first, as written, then the language's preset, then English's, each
	// once and only where it decides what its kind does.
	listed := map[string]bool{}
	for _, k := range wordKinds {
		var candidates []string
		for _, w := range cfg.Vocabulary.of(k) {
			candidates = append(candidates, strings.TrimSpace(w))
		}
		if cfg.Vocabulary.of(k) == nil {
			candidates = append(candidates, p.words.of(k)...)
		}
		if lang != English {
			candidates = append(candidates, presets[English].words.of(k)...)
		}
		for _, w := range candidates {
			key := phraseKey(w)
			if c, ok := v.commands[key]; ok && c == k.command() && !listed[key] {
				listed[key] = true
				switch k {
				case approveWord:
					v.words.Approve = append(v.words.Approve, w)
				case rejectWord:
					v.words.Reject = append(v.words.Reject, w)
				case rememberWord:
					v.words.Remember = append(v.words.Remember, w)
				}
			}
		}
	}

	configured := cfg.Replies.byKey()
	for _, k := range replyKeys {
		text := configured[k]
		if text == "" {
			text = p.replies.byKey()[k]
		} else if k == ReplyAmbiguous && !strings.Contains(text, idsPlaceholder) {
			fail("replies."+string(k), "%q must contain %s, where the pending proposals' ids go", text, idsPlaceholder)
		}
		v.replies[k] = text
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return v, nil
}

// checkPhrase says what makes w unusable as a phrase, or "" when nothing
// does. Each refusal keeps a rule of the parser true whatever the
// configuration: a quoted text, a question or two lines never decide.
func checkPhrase(w string) string {
	if !utf8.ValidString(w) {
		return "not valid UTF-8"
	}
	t := strings.TrimSpace(w)
	if t == "" {
		return "empty phrase"
	}
	if strings.ContainsFunc(t, isLineBreak) {
		return "contains a line break: a command is one line"
	}
	if strings.Contains(t, "#") {
		return `contains "#", which marks a proposal id`
	}
	first, _ := utf8.DecodeRuneInString(t)
	last, _ := utf8.DecodeLastRuneInString(t)
	if unicode.Is(unicode.Quotation_Mark, first) || unicode.Is(unicode.Quotation_Mark, last) {
		return "begins or ends with a quotation mark: a quoted command is never a decision"
	}
	switch last {
	case '.', '!':
		return fmt.Sprintf("ends with %q: one trailing \".\" or \"!\" is already allowed after every phrase", last)
	case '?':
		return `ends with "?": a question is never a decision`
	}
	return ""
}

// canonicalLanguage returns the preset name lang stands for.
func canonicalLanguage(lang string) (string, bool) {
	if lang == "" {
		return English, true
	}
	for name := range presets {
		if strings.EqualFold(lang, name) {
			return name, true
		}
	}
	return "", false
}
