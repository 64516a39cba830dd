package textdecision

import "strings"

// ReplyKey names an answer to a text decision. Its values are the field
// names under replies in the configuration.
type ReplyKey string

// The answers, one per outcome of a text decision.
const (
	// ReplyApproved: the approval was applied.
	ReplyApproved ReplyKey = "approved"
	// ReplyApprovedQueued: the approval was applied and the worker will run
	// the action.
	ReplyApprovedQueued ReplyKey = "approved_queued"
	// ReplyRejected: the rejection was applied.
	ReplyRejected ReplyKey = "rejected"
	// ReplyUnchanged: the decision asked for is the one that already stands.
	ReplyUnchanged ReplyKey = "unchanged"
	// ReplyConflict: another decision stands, or the proposal is past
	// deciding.
	ReplyConflict ReplyKey = "conflict"
	// ReplyExpired: the proposal's deadline has passed.
	ReplyExpired ReplyKey = "expired"
	// ReplyAmbiguous: several proposals are pending and the message named
	// none; "{ids}" in its text becomes their ids.
	ReplyAmbiguous ReplyKey = "ambiguous"
)

var replyKeys = [...]ReplyKey{
	ReplyApproved, ReplyApprovedQueued, ReplyRejected,
	ReplyUnchanged, ReplyConflict, ReplyExpired, ReplyAmbiguous,
}

// idsPlaceholder is replaced by the ids given to Reply.
const idsPlaceholder = "{ids}"

// Reply returns the text answered for key, with every "{ids}" replaced by
// ids joined with ", ". It returns "" for a key that is not one of the
// ReplyKey constants.
func (v *Vocabulary) Reply(key ReplyKey, ids []string) string {
	if v == nil {
		v = english
	}
	return strings.ReplaceAll(v.replies[key], idsPlaceholder, strings.Join(ids, ", "))
}

func (r Replies) byKey() map[ReplyKey]string {
	return map[ReplyKey]string{
		ReplyApproved:       r.Approved,
		ReplyApprovedQueued: r.ApprovedQueued,
		ReplyRejected:       r.Rejected,
		ReplyUnchanged:      r.Unchanged,
		ReplyConflict:       r.Conflict,
		ReplyExpired:        r.Expired,
		ReplyAmbiguous:      r.Ambiguous,
	}
}
