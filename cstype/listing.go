package cstype

// MaxPageSize is the largest page a listing returns.
const MaxPageSize = 1000

// ProposalPage is one page of a listing.
type ProposalPage struct {
	Proposals []*Proposal
	// Next is the cursor of the following page, empty on the last page.
	Next string
}

// DecideOutcome is the answer to a decision.
type DecideOutcome string

// The answers to a decision (docs/api.md §Decisions).
const (
	DecideApplied   DecideOutcome = "applied"
	DecideUnchanged DecideOutcome = "unchanged"
	DecideConflict  DecideOutcome = "conflict"
	DecideExpired   DecideOutcome = "expired"
)

// MaxIDLen bounds every id a caller chooses (thread, run, tool call) and
// proposal ids, so that they fit in a pagination cursor.
const MaxIDLen = 256
