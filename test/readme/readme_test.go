package readme

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestREADMEFromCleanClone runs the README as written in a clean clone (see
// the package's doc).
func TestREADMEFromCleanClone(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: running the README from a clean clone builds and serves the command in it (a minute or more)")
	}
	need(t, "git", "go", "bash", "curl", "make")
	clone := cloneRepo(t)
	b, err := os.ReadFile(filepath.Join(clone, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)

	// The set-up: two commands, the first runs the demo.
	setup, err := setupCommands(readme)
	if err != nil {
		t.Fatal(err)
	}
	if len(setup) != 2 {
		t.Fatalf("the set-up block has %d commands, want the two the README promises: %q", len(setup), setup)
	}
	srv := startServer(t, clone, setup[0], readerEnv("COUNTERSIGN_LISTEN=127.0.0.1:0"))
	banner := srv.output()
	t.Logf("%s printed:\n%s", setup[0], banner)
	// "on SQLite ./countersign.db ...; with no --config it runs a
	// self-contained demo."
	if store := listening.FindStringSubmatch(banner)[2]; store != "sqlite:countersign.db" {
		t.Errorf("%s serves the store %s, want sqlite:countersign.db", setup[0], store)
	}
	if _, err := os.Stat(filepath.Join(clone, "countersign.db")); err != nil {
		t.Errorf("%s did not create ./countersign.db in the clone: %v", setup[0], err)
	}
	if !strings.Contains(banner, "No --config given: running the demo") {
		t.Errorf("%s did not say it runs the demo", setup[0])
	}

	t.Run("make test is a target", func(t *testing.T) {
		f := strings.Fields(setup[1])
		if f[0] != "make" {
			t.Fatalf("the second set-up command %q is not make's: this test knows how to check make targets only", setup[1])
		}
		// -n: what make test would run, without running it (CI runs it).
		if out, err := run(stepContext(t, 2*time.Minute), clone, readerEnv(), "make", append([]string{"-n"}, f[1:]...)...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	})

	t.Run("blocks", func(t *testing.T) {
		blocks, err := checkedBlocks(readme)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			t.Run(b.name, func(t *testing.T) {
				// Twice on the one database, as the README promises: each run
				// deals with a proposal of its own.
				var ids []string
				for i := 1; i <= 2; i++ {
					id, out, err := runBlock(stepContext(t, 2*time.Minute), clone, srv.base, b)
					if err != nil {
						t.Fatalf("run %d of the %s block: %v\n--- the block's output:\n%s", i, b.name, err, out)
					}
					ids = append(ids, id)
				}
				if ids[0] == ids[1] {
					t.Errorf("both runs of the %s block dealt with %s: want one proposal each", b.name, ids[0])
				}
			})
		}
	})

	t.Run("command line", func(t *testing.T) {
		// "make build (into bin/countersign)"
		if out, err := run(stepContext(t, 5*time.Minute), clone, readerEnv(), "make", "build"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		bin := filepath.Join(clone, "bin")
		if fi, err := os.Stat(filepath.Join(bin, "countersign")); err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Fatalf("make build made no executable bin/countersign: %v", err)
		}
		t.Run("README", func(t *testing.T) {
			// Client commands read COUNTERSIGN_URL, as the README says.
			env := withPath(readerEnv("COUNTERSIGN_URL="+srv.base), bin)
			if err := runCLIParagraph(stepContext(t, 2*time.Minute), readme, clone, srv.base, env); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("banner", func(t *testing.T) {
			// The banner exports COUNTERSIGN_URL itself.
			if err := runBanner(stepContext(t, 2*time.Minute), banner, clone, withPath(readerEnv(), bin)); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("go install", func(t *testing.T) {
		ctx := stepContext(t, 5*time.Minute)
		gobin := t.TempDir()
		if out, err := run(ctx, clone, append(readerEnv(), "GOBIN="+gobin), "go", "install", "./cmd/countersign"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		out, err := bashScript(ctx, clone, withPath(readerEnv(), gobin), "command -v countersign\ncountersign version\n")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if want := filepath.Join(gobin, "countersign") + "\ncountersign "; !strings.HasPrefix(out, want) {
			t.Errorf("the installed countersign version printed %q, want it to begin %q", out, want)
		}
	})

	t.Run("go run any command", func(t *testing.T) {
		// "go run ./cmd/countersign … runs any of them without installing"
		out, err := bashScript(stepContext(t, 5*time.Minute), clone, readerEnv(), "go run ./cmd/countersign version\n")
		if err != nil || !strings.HasPrefix(out, "countersign ") {
			t.Fatalf("go run ./cmd/countersign version: %v\n%s", err, out)
		}
	})

	t.Run("examples/quickstart", func(t *testing.T) {
		const cmd = "go run ./examples/quickstart"
		if !strings.Contains(readme, "`"+cmd+"` walks through the three modes") {
			t.Fatalf("README.md no longer says `%s` walks through the three modes: update this test", cmd)
		}
		out, err := bashScript(stepContext(t, 5*time.Minute), clone, readerEnv(), cmd+"\n")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		// The README's modes table: wait, two_phase, independent.
		for _, want := range []string{"wait mode", "two_phase mode", "independent mode", "every approved call ran exactly once"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s did not print %q:\n%s", cmd, want, out)
			}
		}
	})

	t.Run("a broken README fails", func(t *testing.T) {
		testBroken(t, readme, banner, clone, srv.base)
	})
}

// checkedBlocks returns the README's marked sh blocks, each with a check,
// and fails when a block has no check or a check no block.
func checkedBlocks(readme string) ([]block, error) {
	blocks, err := shBlocks(readme)
	if err != nil {
		return nil, err
	}
	var p problems
	for _, b := range blocks {
		if _, ok := blockChecks[b.name]; !ok {
			p.add("README.md marks a block %q that no check knows: add one to blockChecks", b.name)
		}
	}
	for name := range blockChecks {
		if !slices.ContainsFunc(blocks, func(b block) bool { return b.name == name }) {
			p.add("README.md has no <!-- %s --> block any more: remove its check", name)
		}
	}
	return blocks, p.err()
}

// runBlock runs a README block as written, with bash in the clone's root
// and COUNTERSIGN_URL naming the server, and checks its output. It returns
// the proposal the run dealt with and the output.
func runBlock(ctx context.Context, clone, base string, b block) (string, string, error) {
	out, err := bashScript(ctx, clone, readerEnv("COUNTERSIGN_URL="+base), b.script)
	if err != nil {
		return "", out, err
	}
	id, err := blockChecks[b.name](base, out)
	return id, out, err
}

// runCLIParagraph runs the commands of the README's "The same from the
// command line:" with env (bin/ on PATH), as printed but for the proposal
// id placeholder: a refund alice's agent asked for just before.
func runCLIParagraph(ctx context.Context, readme, clone, base string, env []string) error {
	cmds, err := cliCommands(readme)
	if err != nil {
		return err
	}
	var call callAnswer
	if err := api(base, "POST", "/v1/calls", "ck_agent_alice", map[string]any{
		"thread_id": "readme-cli", "tool_call_id": fmt.Sprintf("call_readme_%d", time.Now().UnixNano()),
		"action": "payments.refund", "input": map[string]any{"amount": 12, "customer": "c_3"},
	}, &call); err != nil {
		return err
	}
	if call.Status != "pending" {
		return fmt.Errorf("the refund to decide is %s, not pending", call.Status)
	}
	var p problems
	for _, cmd := range cmds {
		check, ok := cliCheck(cmd)
		if !ok {
			p.add("README.md prints `%s`, which no check knows: add one to cliChecks", cmd)
			continue
		}
		line := withID(cmd, call.ProposalID)
		out, err := bashScript(ctx, clone, env, line)
		if err == nil {
			err = check(out, call.ProposalID)
		}
		if err != nil {
			p.add("`%s` (from the README's `%s`): %v\n%s", line, cmd, err, out)
		}
	}
	return p.err()
}

// runBanner runs the commands the demo's banner prints, as printed, with
// env (bin/ on PATH), and checks what their comments say.
func runBanner(ctx context.Context, banner, clone string, env []string) error {
	script, err := bannerScript(banner)
	if err != nil {
		return err
	}
	out, err := bashScript(ctx, clone, env, script)
	if err == nil {
		err = checkBanner(out)
	}
	if err != nil {
		return fmt.Errorf("the banner's commands: %v\n--- the commands:\n%s--- their output:\n%s", err, script, out)
	}
	return nil
}

// testBroken runs the checks against deliberately broken copies of the
// README, of the banner and of a clean clone: each must fail, and for the
// reason the break is about, or the test could pass a wrong README.
func testBroken(t *testing.T, readme, banner, clone, base string) {
	blockIn := func(t *testing.T, text, name string) block {
		t.Helper()
		blocks, err := shBlocks(text)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(blocks, func(b block) bool { return b.name == name })
		if i < 0 {
			t.Fatalf("no %s block", name)
		}
		return blocks[i]
	}
	runBroken := func(name string) func(t *testing.T, text string) error {
		return func(t *testing.T, text string) error {
			_, _, err := runBlock(stepContext(t, 2*time.Minute), clone, base, blockIn(t, text, name))
			return err
		}
	}
	bin := filepath.Join(clone, "bin")
	cases := []struct {
		name       string
		edit       func(t *testing.T) string // the broken text
		run        func(t *testing.T, text string) error
		wantReason string
	}{{
		name: "quickstart approved by the agent",
		edit: func(t *testing.T) string {
			return editBetween(t, readme, "<!-- quickstart -->", "<!-- /quickstart -->", "Bearer ck_dev_bob", "Bearer ck_agent_alice")
		},
		run:        runBroken("quickstart"),
		wantReason: "2. bob's approval",
	}, {
		name: "conditions with one approver",
		edit: func(t *testing.T) string {
			return editBetween(t, readme, "<!-- conditions -->", "<!-- /conditions -->", "Bearer ck_dev_carol", "Bearer ck_dev_bob")
		},
		run:        runBroken("conditions"),
		wantReason: "2. carol's approval did not approve",
	}, {
		name: "chat answered no",
		edit: func(t *testing.T) string {
			return editBetween(t, readme, "<!-- chat -->", "<!-- /chat -->", `{"text":"yes"}`, `{"text":"no"}`)
		},
		run:        runBroken("chat"),
		wantReason: `2. bob's "yes" did not approve`,
	}, {
		name: "a block without its end marker",
		edit: func(t *testing.T) string {
			return editBetween(t, readme, "<!-- chat -->", "How runs", "<!-- /chat -->", "")
		},
		run:        func(_ *testing.T, text string) error { _, err := checkedBlocks(text); return err },
		wantReason: "is not followed by a sh block and <!-- /chat -->",
	}, {
		name: "a block no check knows",
		edit: func(t *testing.T) string {
			return editBetween(t, readme, "<!-- chat -->", "How runs", "How runs", "<!-- more -->\n```sh\necho more\n```\n<!-- /more -->\n\nHow runs")
		},
		run:        func(_ *testing.T, text string) error { _, err := checkedBlocks(text); return err },
		wantReason: `a block "more" that no check knows`,
	}, {
		name: "command line approval by a non-approver",
		edit: func(t *testing.T) string {
			return editBetween(t, readme, "The same from the command line:", "\n\n", "approve ID --token ck_dev_bob", "approve ID --token ck_dev_alice")
		},
		run: func(t *testing.T, text string) error {
			return runCLIParagraph(stepContext(t, 2*time.Minute), text, clone, base, withPath(readerEnv("COUNTERSIGN_URL="+base), bin))
		},
		wantReason: "countersign approve prp_",
	}, {
		name: "command line command without a check",
		edit: func(t *testing.T) string {
			return editBetween(t, readme, "The same from the command line:", "\n\n", "proposals list", "proposals show ID")
		},
		run: func(t *testing.T, text string) error {
			return runCLIParagraph(stepContext(t, 2*time.Minute), text, clone, base, withPath(readerEnv("COUNTERSIGN_URL="+base), bin))
		},
		wantReason: "which no check knows",
	}, {
		name: "banner with a wrong token",
		edit: func(t *testing.T) string {
			return editBetween(t, banner, bannerStart, "\n\n", "--token ck_dev_bob", "--token ck_nope")
		},
		run: func(t *testing.T, text string) error {
			return runBanner(stepContext(t, 2*time.Minute), text, clone, withPath(readerEnv(), bin))
		},
		wantReason: "401",
	}, {
		name: "banner without the approval",
		edit: func(t *testing.T) string {
			return editBetween(t, banner, bannerStart, "\n\n", `curl -s -X POST "$COUNTERSIGN_URL/v1/proposals/$ID/approve"`, `true "$COUNTERSIGN_URL/v1/proposals/$ID/approve"`)
		},
		run: func(t *testing.T, text string) error {
			return runBanner(stepContext(t, 2*time.Minute), text, clone, withPath(readerEnv(), bin))
		},
		wantReason: "does not hold the worker's outcome",
	}, {
		name: "a clone with ignored files",
		edit: func(t *testing.T) string {
			dir := t.TempDir()
			for _, f := range []string{"web/testdata/axe/node_modules/axe-core/axe.js", "countersign.db", "bin/countersign", "go.mod"} {
				p := filepath.Join(dir, filepath.FromSlash(f))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return dir
		},
		run:        func(_ *testing.T, dir string) error { return noLeaks(dir) },
		wantReason: "[bin countersign.db web/testdata/axe/node_modules]",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(t, tc.edit(t))
			if err == nil {
				t.Fatalf("the check passed: it cannot catch this break")
			}
			if !strings.Contains(err.Error(), tc.wantReason) {
				t.Fatalf("the check failed, but not for the break (want %q):\n%v", tc.wantReason, err)
			}
			t.Logf("the check failed, as it must:\n%v", err)
		})
	}
}

// editBetween replaces old with new in text's first section that begins
// at start and ends at end (end included), failing t when the section or
// old is not there: a break that edits nothing would prove nothing.
func editBetween(t *testing.T, text, start, end, old, new string) string {
	t.Helper()
	i := strings.Index(text, start)
	if i < 0 {
		t.Fatalf("no %q to break", start)
	}
	j := strings.Index(text[i+len(start):], end)
	if j < 0 {
		t.Fatalf("no %q after %q", end, start)
	}
	j += i + len(start) + len(end)
	section := text[i:j]
	if !strings.Contains(section, old) {
		t.Fatalf("no %q between %q and %q to break", old, start, end)
	}
	return text[:i] + strings.Replace(section, old, new, 1) + text[j:]
}
