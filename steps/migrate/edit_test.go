package migrate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestEditScript runs the config edit's script under a real shell, the
// new content on its standard input: the file replaced with its mode,
// the backup beside it, nothing left behind; a file changed since the
// plan (exit 3), a content that did not arrive whole (exit 4) or one
// already in place change nothing. The script itself holds no byte of the
// content.
func TestEditScript(t *testing.T) {
	const old, want = "broker.id=1\nssl.keystore.password=old-secret\n", "broker.id=1\nssl.keystore.password=new-secret\nprocess.roles=broker\n"
	for _, tc := range []struct {
		name      string
		file, in  string
		code      int
		after     string
		backup    bool
		sayOnExit string
	}{
		{name: "edited", file: old, in: want, after: want, backup: true, sayOnExit: "edited; the file before it is"},
		{name: "changed since the plan", file: old + "# hand edit\n", in: want, code: 3, after: old + "# hand edit\n"},
		{name: "content cut short", file: old, in: want[:len(want)-1], code: 4, after: old},
		{name: "nothing arrived", file: old, in: "", code: 4, after: old},
		{name: "already as planned", file: want, in: want, after: want, sayOnExit: "is already as planned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			f := filepath.Join(dir, "server.properties")
			if err := os.WriteFile(f, []byte(tc.file), 0o640); err != nil {
				t.Fatal(err)
			}
			e := editArgs{Node: 1, Path: f, From: sum(old), To: sum(want), Backup: backupOf(f, ToKRaft)}
			script := editScript(e)
			for _, s := range []string{"new-secret", "old-secret", "process.roles"} {
				if strings.Contains(script, s) {
					t.Fatalf("the script holds %q:\n%s", s, script)
				}
			}
			var out []string
			err := steptest.LocalShell{Shell: "/bin/sh"}.RunInput(context.Background(), 1, script, []byte(tc.in), func(l ports.Line) { out = append(out, l.Text) })
			if code, _ := brokers.ExitStatus(err); code != tc.code || (tc.code == 0) != (err == nil) {
				t.Fatalf("exit %v, want %d (%q)", err, tc.code, out)
			}
			if got, _ := os.ReadFile(f); string(got) != tc.after {
				t.Fatalf("file after:\n%s\nwant\n%s", got, tc.after)
			}
			if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o640 {
				t.Fatalf("mode %v, want 0640 kept", fi.Mode().Perm())
			}
			b, err := os.ReadFile(e.Backup)
			if tc.backup != (err == nil) || tc.backup && string(b) != old {
				t.Fatalf("backup %q (%v), want one: %v", b, err, tc.backup)
			}
			if _, err := os.Stat(f + ".kremedy-new"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the temporary file is left behind: %v", err)
			}
			if tc.sayOnExit != "" && !strings.Contains(strings.Join(out, "\n"), tc.sayOnExit) {
				t.Fatalf("output %q lacks %q", out, tc.sayOnExit)
			}
		})
	}
}

// TestApplyEditRefusesAnotherContent: Apply computes the content again;
// one whose sha256 is not the plan's is a stale plan, and nothing runs on
// the host (the Env is nil: any use of it would panic).
func TestApplyEditRefusesAnotherContent(t *testing.T) {
	a := editAction(File{Node: 1, Path: "/etc/kafka/server.properties", Sum: sum("a=1\n"), Text: "a=1\n"}, "a=2\n", "/etc/kafka/server.properties.kremedy-before-kraft")
	err := applyEdit(context.Background(), nil, a, func() (string, error) { return "a=2\nssl.keystore.password=other\n", nil })
	if !errors.Is(err, steps.ErrStalePlan) || !strings.Contains(err.Error(), "nothing was written") || strings.Contains(err.Error(), "other") {
		t.Fatalf("another content: %v", err)
	}
	boom := errors.New("backup unreadable")
	if err := applyEdit(context.Background(), nil, a, func() (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("content that cannot be computed: %v", err)
	}
	if a.Detail == "" || !strings.Contains(a.Detail, "- a=1; + a=2") {
		t.Fatalf("the edit's detail is not its diff: %q", a.Detail)
	}
	if _, ok := a.Args.(editArgs); !ok || a.ID != roll.WhileID(1, "edit") {
		t.Fatalf("action %+v", a)
	}
}

// TestMetadataScriptQuotesEveryPath (L4): a log dir named with $( ),
// backquotes and a double quote is moved and named in the output as it
// is; nothing in its name runs.
func TestMetadataScriptQuotesEveryPath(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "k$(touch pwned)`touch pwned2`\"x")
	if err := os.MkdirAll(filepath.Join(dir, "__cluster_metadata-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := metadataScript([]string{dir, filepath.Join(base, "empty")}, "r1")
	var out []string
	sh := steptest.LocalShell{Shell: "/bin/sh"}
	// The scripts run in base, where a `touch pwned` would land.
	wd, _ := os.Getwd()
	if err := os.Chdir(base); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	if err := sh.Run(context.Background(), 1, script, func(l ports.Line) { out = append(out, l.Text) }); err != nil {
		t.Fatalf("%v\n%s", err, script)
	}
	if want := "moved " + dir + "/__cluster_metadata-0 aside"; len(out) != 1 || out[0] != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	for _, p := range []string{"pwned", "pwned2"} {
		if _, err := os.Stat(filepath.Join(base, p)); err == nil {
			t.Fatalf("a command in the log dir's name ran (%s)", p)
		}
	}
	if _, err := os.Stat(dir + ".__cluster_metadata-0.kremedy-r1"); err != nil {
		t.Fatalf("not moved aside: %v", err)
	}
}
