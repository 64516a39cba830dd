// Package readme runs the README as written, from a clean clone of the
// repository. It proves that the README's set-up works on a machine that has
// only the repository's files, and that every command the README and the
// demo's start-up banner print works as printed there.
//
// TestREADMEFromCleanClone copies the files the next commit would hold
// (git ls-files -co --exclude-standard; cloneRepo says why this and not git
// clone) into a temporary folder, asserts that nothing git ignores came with
// them (bin/, .venv, node_modules, databases, test logs), and in that copy:
//
//   - runs the set-up's first command exactly as printed, `go run
//     ./cmd/countersign serve`, in the copy's root, with no COUNTERSIGN_*
//     variable but COUNTERSIGN_LISTEN (port 0: a free port), waits until it
//     answers, keeps its banner, and checks that it serves the demo on the
//     copy's ./countersign.db; `make -n test` checks that the second
//     command names a target make knows (make test itself is what CI runs);
//   - runs every sh block between <!-- name --> and <!-- /name --> markers
//     with bash, twice on the one database as the README promises, and
//     checks what each block's comments promise (a block without a check
//     fails the test), failing with the block's output;
//   - runs make build, then with bin/ on PATH the commands of the README's
//     "The same from the command line" (its ID placeholder replaced by a
//     real proposal's id) and the banner's commands, as printed; go install
//     into a GOBIN of its own, then countersign version from there; and go
//     run ./cmd/countersign version;
//   - runs go run ./examples/quickstart and checks that it walked through
//     the three modes;
//   - runs the same checks against deliberately broken READMEs, a broken
//     banner and a copy with ignored files in it, and requires each to fail:
//     the test is shown able to fail.
//
// Under go test -short it skips. Without git, bash, curl or make it skips,
// except in CI (CI set), where it fails.
package readme
