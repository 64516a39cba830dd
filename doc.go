// Package countersign puts a human between an AI agent and its side effects.
//
// An agent calls an action (refund a payment, send an email, delete a file).
// Countersign validates the call against the action's JSON Schema, asks the
// policy whether it needs a decision, binds the exact call to a durable
// proposal, lets the right people decide, and executes the approved call at
// most once — or reconciles it when nobody can know whether it ran.
//
// # Concepts
//
//   - An [Action] is a registered tool: a name, a version, a kind (read or
//     write), a JSON Schema for its input and hooks (Authorize, Preflight,
//     Prepare, Execute, Reconcile, Present). Build one with [NewAction], which
//     infers the schema from a Go struct, or [NewRawAction], which takes a
//     schema. [ConfirmTool] makes any action ask for confirmation.
//   - A [Policy] holds [Rule]s over action names: allow, ask or deny. An exact
//     name beats a longer glob, which beats a shorter one. Unmatched read
//     actions are allowed; unmatched write actions ask their requester. A
//     rule may hold only under a condition: [Rule.When], a CEL expression
//     over the input, the actor, the tenant, the thread and the action
//     ("input.amount > 1000"), or a Go [Condition]; among the rules that
//     match, the first whose condition holds applies, and one that cannot
//     decide denies the call ([DeniedByPolicyError]). The proposal records
//     the rule that applied.
//   - A [Call] is one invocation by an [Identity] (tenant, actor, roles) in a
//     thread and run, with a tool-call id that makes it idempotent. A thread
//     belongs to its first caller: only the owner makes calls in it, and a
//     call by anyone else is refused ([ForbiddenError]) before anything is
//     stored, run or revealed.
//   - A proposal ([cstype.Proposal]) is the durable record of one write call,
//     stored before anything runs: the approval record of a call that needs a
//     decision, or the record of a write the policy allows (created
//     executing, no approvers). It freezes the input (RFC 8785 canonical JSON
//     and its SHA-256 digest), the action's version, the preview and state
//     version from Prepare, the approvers, quorum and deadline; repeating the
//     call replays it and never executes again. Reads the policy allows leave
//     no record.
//   - A [Decision] approves or rejects, through a channel ("api", "web",
//     "cli", "text", "agui", "mcp"). Each is one compare-and-set: applied, unchanged,
//     conflict or expired.
//   - A grant remembers an approval for a run or a thread. It becomes live only
//     after the originating execution succeeded, stands for a complete
//     approval (under a quorum, every counted approval asked to remember),
//     approves only while its rule's terms are unchanged, and is checked again
//     when the proposal it approves is created.
//   - An outcome is recorded once per terminal proposal, admitted to its thread
//     as one message, and reported to OnSettled hooks once.
//
// # Modes
//
// What the calling agent experiences depends on the mode:
//
//   - [ModeWait] (the default): Call blocks until a human decides, then
//     executes in the caller's process. The proposal is stored before the
//     caller blocks, so a caller that gives up resumes by repeating the call.
//   - [ModeTwoPhase]: Call answers confirmation_required with a confirmation
//     id; after the approval, the agent repeats the call with that id as
//     Evidence. Evidence is single-use and bound to tenant, thread, requester,
//     action, version and input digest.
//   - [ModeIndependent]: Call returns a receipt at once; a [Worker] executes
//     after approval.
//
// # Execution
//
// An approved proposal is claimed (approved → executing, under a lease) before
// Execute runs, so concurrent callers and workers execute it at most once.
// Just before Execute the engine re-checks the requester (ActorResolver), the
// action's version, authorization, schema drift and preflight. An uncertain
// outcome goes to Reconcile when the action has one, is retried with the same
// operation id when the action is idempotent, and is otherwise recorded as
// unknown: nothing re-issues a non-idempotent write.
//
// The state machine is drawn in docs/state-machine.md, and the layers, the
// allowed imports and the path of a call in docs/architecture.md. The
// records the engine reads and returns are package cstype's; storage
// drivers live in store/memstore, store/sqlitestore and store/pgstore,
// share one contract ([store.Store], given as [Options].Store) and pass one
// conformance suite (store/storetest).
package countersign
