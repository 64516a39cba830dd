package config

import (
	"github.com/countersign/countersign/textdecision"
	"go.yaml.in/yaml/v3"
)

// TextVocabulary compiles the text_decisions section: the phrases that
// decide a proposal from a conversation and the replies to them. Its
// errors are those Validate reports for the section.
func (c *Config) TextVocabulary() (*textdecision.Vocabulary, error) {
	v := &validator{file: c.file, lines: c.lines}
	voc := v.textDecisions(c.TextDecisions)
	if err := join(v.errs); err != nil {
		return nil, err
	}
	return voc, nil
}

func (d *decoder) textDecisions(t *textdecision.Config, path string, n *yaml.Node) {
	d.mapping(path, n, []key{
		{"language", text(d, &t.Language)},
		{"vocabulary", func(p string, v *yaml.Node) {
			w := &t.Vocabulary
			d.mapping(p, v, []key{
				{"approve", texts(d, &w.Approve)},
				{"reject", texts(d, &w.Reject)},
				{"remember", texts(d, &w.Remember)},
			})
		}},
		{"replies", func(p string, v *yaml.Node) {
			r := &t.Replies
			d.mapping(p, v, []key{
				{"approved", text(d, &r.Approved)},
				{"approved_queued", text(d, &r.ApprovedQueued)},
				{"rejected", text(d, &r.Rejected)},
				{"unchanged", text(d, &r.Unchanged)},
				{"conflict", text(d, &r.Conflict)},
				{"expired", text(d, &r.Expired)},
				{"ambiguous", text(d, &r.Ambiguous)},
			})
		}},
	})
}

// textDecisions checks the section as textdecision.New does, placing each
// problem at its field, and returns the vocabulary when there is none.
func (v *validator) textDecisions(t textdecision.Config) *textdecision.Vocabulary {
	voc, err := textdecision.New(t)
	if err == nil {
		return voc
	}
	for _, e := range unjoin(err) {
		if fe, ok := e.(*textdecision.FieldError); ok {
			v.fail("text_decisions."+fe.Field, "%s", fe.Reason)
		} else {
			v.fail("text_decisions", "%v", e)
		}
	}
	return nil
}
