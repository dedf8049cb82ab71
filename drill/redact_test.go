package drill

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRecordKeepsNoWebhookURL: a drill's command record hides a webhook's
// URL or token given on the command line (a Slack URL is its secret) and is
// private to its user (review L9).
func TestRecordKeepsNoWebhookURL(t *testing.T) {
	const hook = "https://hooks.slack.com/services/T0/B0/s3cr3t"
	args := []string{"run", "topic-cleanup", "--notify", hook, "--notify=" + hook, "--notify-token", "tok3n", "--notify", "env:HOOK", "--set", "topic=orders"}
	want := []string{"run", "topic-cleanup", "--notify", "[redacted]", "--notify=[redacted]", "--notify-token", "[redacted]", "--notify", "env:HOOK", "--set", "topic=orders"}
	if got := RedactArgs(args); !slices.Equal(got, want) {
		t.Fatalf("RedactArgs = %q, want %q", got, want)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Dir(Path(dir, commandsFile)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Record(dir, Command{At: time.Now(), Args: args}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(Path(dir, commandsFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cr3t") || strings.Contains(string(b), "tok3n") {
		t.Fatalf("the record holds a secret: %s", b)
	}
	fi, _ := os.Stat(Path(dir, commandsFile))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("the record's mode is %04o, want 0600", fi.Mode().Perm())
	}
}
