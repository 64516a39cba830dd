package typescript

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/servetest"
)

// TestInstallFromTarball installs each npm package of this folder the way
// clients/typescript/README.md tells users to: npm pack in the checkout
// (prepack builds dist/), then npm install of the tarballs into a project of
// its own. The install is --offline with an empty npm cache, so it shows
// that the packages need nothing from a registry: the client has no runtime
// dependency, and the adapters take the client as a peer (a "file:.."
// dependency would be packed as it is, and break wherever it is installed).
// The installed client then makes a call of the demo's crm.lookup against
// the real binary, and tsc --strict type-checks an import of it; each
// adapter is imported with its framework peers (linked from the adapter's
// own node_modules, since the registry is not asked).
//
// It lives in this package so that its builds of dist/ never run beside
// TestClient's (tests of one package run one after the other).
func TestInstallFromTarball(t *testing.T) {
	what := "this test packs and installs the TypeScript packages"
	client := nodetest.Need(t, ".", what)
	adapters := map[string]string{
		"langgraph":     nodetest.Need(t, "langgraph", what),
		"openai-agents": nodetest.Need(t, "openai-agents", what),
	}
	packs := t.TempDir()
	clientTGZ := pack(t, client, packs, "@countersign/client",
		[]string{"package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/schema.d.ts"})

	t.Run("client", func(t *testing.T) {
		app := newProject(t)
		npm(t, app, "install", clientTGZ)
		requireNoFileDeps(t, app, "@countersign/client")

		url := servetest.Serve(t, servetest.Build(t), []string{"--store", servetest.SQLiteStore(t)})
		out := node(t, app, `
import { createClient, Countersign, CountersignError } from "@countersign/client";
const c = createClient({ baseUrl: process.env.COUNTERSIGN_URL, token: "ck_agent_alice" });
const res = await c.call({ thread_id: "install_t1", tool_call_id: "install_call_1", action: "crm.lookup", input: { customer: "c_9" } });
let notFound = null;
try { await c.getProposal("prp_nope"); } catch (e) { notFound = e instanceof CountersignError ? e.status : String(e); }
console.log(JSON.stringify({ isClient: c instanceof Countersign, status: res.status, result: res.result, notFound }));
`, "COUNTERSIGN_URL="+url)
		var got struct {
			IsClient bool            `json:"isClient"`
			Status   string          `json:"status"`
			Result   json.RawMessage `json:"result"`
			NotFound any             `json:"notFound"`
		}
		if err := json.Unmarshal([]byte(lastLine(out)), &got); err != nil {
			t.Fatalf("node printed %q: %v", out, err)
		}
		if !got.IsClient || got.Status != "succeeded" || !strings.Contains(string(got.Result), `"tier":"gold"`) || got.NotFound != float64(404) {
			t.Fatalf("the installed client answered %+v (result %s)", got, got.Result)
		}

		// The types travel with it: a strict TypeScript project compiles
		// against the installed package alone.
		write(t, filepath.Join(app, "check.ts"), `import { createClient, type Proposal, type CallResponse } from "@countersign/client";
import type { paths } from "@countersign/client/schema";
const c = createClient({ baseUrl: "http://127.0.0.1:8080", token: "ck_agent_alice" });
export const p: Promise<Proposal> = c.getProposal("prp_1");
export const r: Promise<CallResponse> = c.call({ thread_id: "t", tool_call_id: "x", action: "crm.lookup", input: {} });
export type Calls = paths["/v1/calls"];
`)
		write(t, filepath.Join(app, "tsconfig.json"), `{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022",
  "module": "nodenext", "moduleResolution": "nodenext", "lib": ["es2022", "dom"], "types": [], "skipLibCheck": false},
  "files": ["check.ts"]}`)
		run(t, app, 3*time.Minute, nil, filepath.Join(client, "node_modules", ".bin", "tsc"), "-p", app)
	})

	for name, dir := range adapters {
		t.Run(name, func(t *testing.T) {
			pkg := "@countersign/" + name
			tgz := pack(t, dir, packs, pkg, []string{"package.json", "README.md", "dist/index.js", "dist/index.d.ts"})
			app := newProject(t)
			// --legacy-peer-deps: npm would otherwise fetch the framework
			// peers from the registry; they are linked below instead.
			npm(t, app, "install", "--legacy-peer-deps", clientTGZ, tgz)
			requireNoFileDeps(t, app, pkg)
			if _, err := os.Stat(filepath.Join(app, "node_modules", pkg, "node_modules")); err == nil {
				t.Fatalf("%s installed packages of its own: it must use the project's @countersign/client", pkg)
			}
			var manifest struct {
				Peers map[string]string `json:"peerDependencies"`
			}
			readJSON(t, filepath.Join(app, "node_modules", pkg, "package.json"), &manifest)
			if manifest.Peers["@countersign/client"] == "" {
				t.Fatalf("%s does not name @countersign/client as a peer: %v", pkg, manifest.Peers)
			}
			for peer := range manifest.Peers {
				if peer == "@countersign/client" {
					continue
				}
				link := filepath.Join(app, "node_modules", peer)
				if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(dir, "node_modules", peer), link); err != nil {
					t.Fatal(err)
				}
			}
			out := node(t, app, `
const m = await import("`+pkg+`");
const { Countersign } = await import("@countersign/client");
console.log(JSON.stringify({ gated: typeof m.gated, client: typeof Countersign }));
`)
			if got := lastLine(out); got != `{"gated":"function","client":"function"}` {
				t.Fatalf("importing %s printed %q", pkg, out)
			}
		})
	}
}

// pack runs npm pack in dir (prepack builds dist/) into dest and returns
// the tarball's path, after checking that it holds want and nothing of the
// sources or the tests.
func pack(t *testing.T, dir, dest, name string, want []string) string {
	t.Helper()
	out := run(t, dir, 5*time.Minute, nil, "npm", "pack", "--json", "--pack-destination", dest)
	var packed []struct {
		Name     string `json:"name"`
		Filename string `json:"filename"`
		Files    []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	// npm prints the build's output (prepack) before the JSON.
	start := strings.Index(out, "[\n")
	if start < 0 || json.Unmarshal([]byte(out[start:]), &packed) != nil || len(packed) != 1 || packed[0].Name != name {
		t.Fatalf("npm pack in %s printed:\n%s", dir, out)
	}
	files := map[string]bool{}
	for _, f := range packed[0].Files {
		files[f.Path] = true
		if strings.HasPrefix(f.Path, "src/") || strings.HasPrefix(f.Path, "test/") || strings.HasPrefix(f.Path, "dist-tests/") || strings.HasPrefix(f.Path, "node_modules/") {
			t.Errorf("%s packs %s", name, f.Path)
		}
	}
	for _, w := range want {
		if !files[w] {
			t.Errorf("%s does not pack %s (it packs %v)", name, w, files)
		}
	}
	return filepath.Join(dest, packed[0].Filename)
}

// newProject makes an empty npm project (ES modules) in a folder of its own.
func newProject(t *testing.T) string {
	t.Helper()
	app := t.TempDir()
	write(t, filepath.Join(app, "package.json"), `{"name": "app", "version": "1.0.0", "private": true, "type": "module"}`)
	return app
}

// npm runs npm with args in app, offline, on an empty cache of its own.
func npm(t *testing.T, app string, args ...string) string {
	t.Helper()
	args = append(args, "--offline", "--no-audit", "--no-fund", "--ignore-scripts", "--cache", filepath.Join(app, ".npm-cache"))
	return run(t, app, 3*time.Minute, nil, "npm", args...)
}

// node runs script as an ES module in app (so that its imports resolve
// from app's node_modules) and returns what it printed.
func node(t *testing.T, app, script string, env ...string) string {
	t.Helper()
	path := filepath.Join(app, "probe.mjs")
	write(t, path, script)
	return run(t, app, 2*time.Minute, env, "node", path)
}

func run(t *testing.T, dir string, timeout time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), nodetest.QuietEnv...), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// requireNoFileDeps fails t when the installed pkg depends on a path
// ("file:", "link:"): one that exists only in this checkout.
func requireNoFileDeps(t *testing.T, app, pkg string) {
	t.Helper()
	var m struct {
		Deps map[string]string `json:"dependencies"`
	}
	readJSON(t, filepath.Join(app, "node_modules", pkg, "package.json"), &m)
	for name, spec := range m.Deps {
		if strings.HasPrefix(spec, "file:") || strings.HasPrefix(spec, "link:") {
			t.Errorf("%s depends on %s at %q, a path only this checkout has", pkg, name, spec)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
