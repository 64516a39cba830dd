// Package docs checks the repository's documents against the repository:
//
//   - no tracked file refers to a path outside the repository (the shared
//     folder the contract was first written in), names the contract or the
//     design notes other than as docs/api.md and docs/design.md, or names a
//     Markdown file that is not there; every relative link of a Markdown
//     file resolves to a tracked file, and its #anchor to a heading there;
//   - docs/api.md, the published contract, and server/openapi.json agree:
//     every operation of the OpenAPI document is in the contract's Routes
//     table and the other way round, except the contract routes not built
//     yet (notYetServed, a commented list), which no code may serve until
//     the OpenAPI document has them; the server's own routes are exactly the
//     OpenAPI operations; and every error code of the OpenAPI document is in
//     the contract's error-code table;
//   - README.md's Layout table names every folder that holds Go code.
//
// The files come from git ls-files at the repository's root; without git the
// tests skip, except in CI (CI set), where they fail.
package docs
