// Package auditchain is the audit log's hash chain: how an event is
// hashed into its tenant's chain, how the chain's head is signed in
// checkpoints, and how a chain, read back as JSON lines or pages, is
// verified.
//
// Each event of a tenant carries seq (1, 2, 3, …), prev_hash (the hash of
// the event before it; "" for the first) and hash: the lowercase hex
// SHA-256 of prev_hash (UTF-8) followed by the RFC 8785 canonical JSON of
// the event without its hash. Because the hash covers the event's exported
// JSON form, a verifier needs nothing but that form: it works the same on
// a file exported last year and on a page the server answers now.
//
// The sealer (store drivers, through store.SealEvents) computes hashes with
// Hash; the CLI and tests check them with a Verifier, which names the first
// event whose sequence, link or hash does not hold.
//
// A hash chain alone cannot show that it was not rewritten whole, or cut
// short, by someone who can write to the database. With a signing key, the
// sealer also signs a Checkpoint of every tenant's chain every
// checkpoint_every: {tenant, seq, hash, at, key_id, signature}, the
// signature Ed25519 over the RFC 8785 JSON of the checkpoint without it.
// An ExportVerifier given the public keys checks that every checkpoint is
// signed, matches the chain, and that the newest is recent.
package auditchain
