// Package textdecision reads a proposal decision typed into a conversation:
// "yes", "no", "always in this conversation", optionally followed by
// "#prp_…" to name the proposal. It is a pure parser: a message, a
// [Vocabulary] and the thread's proposals the sender may see go in; a
// [Result] comes out, and nothing is decided here. The caller (the engine,
// on the messages route and the chat channels) turns a [Decide] result into
// one decision recorded with via "text", and answers with [Vocabulary.Reply].
// The package imports neither the engine nor a store.
//
// # What is a decision
//
// A message decides only when the whole of it is one decision command.
// Anything else is an ordinary message, which goes to the agent: a text
// the parser misses costs the user a second try, while a text it wrongly
// took for a command would decide a proposal nobody meant to decide. So the
// rules are narrow:
//
//   - Only a message with role "user" ([RoleUser]) can decide. Assistant and
//     tool messages, and anything a model produced, are ordinary.
//   - The text is normalised to NFC and trimmed of surrounding white space;
//     what remains must be one line. A line break inside ("yes\nplease",
//     also \r, \v, \f, U+0085, U+2028, U+2029) makes it ordinary, as does
//     text that is not valid UTF-8.
//   - The command is one of the vocabulary's phrases, compared with Unicode
//     case folding and canonical equivalence: "YES", "Sim" and a decomposed
//     "NÃO" match "yes", "sim" and "não"; compatibility forms such as a
//     fullwidth "ｙｅｓ" do not. Between the words of a phrase any run of
//     blanks (spaces, tabs, other white space that breaks no line) counts as
//     one space: "always  in this conversation". Nothing else may surround
//     the phrase: "yes?", "\"yes\"", "«sim»", "yes please", "ok yes" are
//     ordinary.
//   - At most one "." or "!" may end the command: "yes." and "YES!" decide,
//     "yes..", "yes!!" and "yes ." do not.
//   - An optional proposal id ends the message: blanks, "#", then the id with
//     no blank in it ("yes #prp_1", "sempre nesta conversa #prp_1"). The one
//     "." or "!" may stand after the phrase or after the id ("yes! #prp_1",
//     "yes #prp_1!"), not both. The "#" must follow a blank: "yes#prp_1" is
//     ordinary, because the contract writes the space and a word glued to a
//     "#" reads as a tag, not as an answer. "yes #" and "yes #a #b" are
//     ordinary. The id is compared exactly; failing that, case-insensitively
//     when exactly one of the thread's ids matches that way.
//
// Which proposal is decided then depends on the thread ([Thread]):
//
//   - With an id: the id must be one of the thread's proposals, whatever its
//     status; otherwise (another thread's id, a typo) the message is
//     ordinary. A proposal that is no longer pending still yields [Decide]:
//     the decision's own answer (unchanged, conflict, expired) tells the
//     user what happened.
//   - Without an id: exactly one pending proposal yields [Decide] on it;
//     several yield [Ambiguous] with their ids, so the caller can ask which
//     one and decide nothing; none leaves the message ordinary.
//
// Whether the sender may make the decision (approvers, self-approval, the
// rule's channels) is the engine's question, not the parser's.
//
// # Vocabularies
//
// Two languages are preset ([English] is the default):
//
//	language  approve                  reject                        approve and remember for the thread
//	en        yes, approve, confirm    no, reject, deny              always in this conversation
//	pt-BR     sim, aprovar, confirmar  não, nao, rejeitar, cancelar  sempre nesta conversa
//
// The English phrases are accepted in every language: a pt-BR vocabulary
// also takes "yes" and "no".
//
// [Config] is the text_decisions block of the server's configuration:
//
//	text_decisions:
//	  language: pt-BR                # en (default) | pt-BR
//	  vocabulary:                    # optional; each kind named replaces the preset's
//	    approve: [sim, aprovar, ok]
//	    reject: [não, nao]
//	    remember: [sempre nesta conversa]
//	  replies:                       # optional; each left out is the language's default
//	    approved: "…"
//	    approved_queued: "…"
//	    rejected: "…"
//	    unchanged: "…"
//	    conflict: "…"
//	    expired: "…"
//	    ambiguous: "… {ids} …"       # {ids} becomes the pending proposals' ids
//
// A kind named under vocabulary replaces the language preset's phrases of
// that kind, and only of that kind: naming approve leaves reject and
// remember as preset. For a language other than en the English preset's
// phrases stay accepted beside the configured ones, whatever is configured,
// so that "yes" and "no" work in every deployment. A preset phrase keeps its
// meaning even when its kind is replaced: a configuration may drop "sim" or
// (in en) "yes" by listing approve without it, but no configuration makes
// "yes" reject or "sim" remember. So these are errors: a configured phrase
// that another kind holds (configured, in the language's preset or in the
// English one), an empty list (leave the field out instead), an empty
// phrase, one holding a line break or "#", one that begins or ends with a
// quotation mark or ends with ".", "!" or "?" (it could never match, or
// would make a quoted text or a question decide), and an ambiguous reply
// without "{ids}". [Config.Validate] reports every one as a [*FieldError]
// naming the field. Phrases are trimmed and compared like messages, so "OK"
// and "ok" are one phrase, as are a composed and a decomposed "não"; a
// phrase repeated within its kind is harmless.
//
// A nil *Vocabulary is the English preset.
package textdecision
