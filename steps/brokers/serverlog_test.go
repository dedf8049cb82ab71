package brokers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/ports"
)

// localHosts runs a host's commands on this machine with /bin/sh.
type localHosts struct{ ports.Hosts }

func (localHosts) Run(ctx context.Context, _ int32, cmd string, out func(ports.Line)) error {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd)
	var stderr strings.Builder
	c.Stderr = &stderr
	b, err := c.Output()
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		out(ports.Line{Text: l})
	}
	if stderr.Len() > 0 {
		out(ports.Line{Text: strings.TrimSpace(stderr.String()), Stderr: true})
	}
	return err
}

// TestLogLinesOnARealShell runs the script /bin/sh would run on a host,
// on a log written as Kafka 3.9 writes an ENOSPC: the last n places, each
// with its log4j header line (time, what failed); a file that is not
// there is an error saying so; a hostile path is a path, never code.
func TestLogLinesOnARealShell(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "it's $(touch pwned) `x`.log")
	log := `[2026-12-06 08:59:00,000] INFO started (kafka.server.KafkaServer)
[2026-12-06 09:00:00,001] ERROR Error while appending records to orders-0 in dir /data (org.apache.kafka.storage.internals.log.LogDirFailureChannel)
java.io.IOException: No space left on device
	at java.base/sun.nio.ch.FileDispatcherImpl.write0(Native Method)
	at java.base/sun.nio.ch.FileChannelImpl.write(FileChannelImpl.java:285)
[2026-12-06 09:00:00,002] ERROR Error while appending records to orders-2 in dir /data (org.apache.kafka.storage.internals.log.LogDirFailureChannel)
java.io.IOException: No space left on device
	at java.base/sun.nio.ch.FileDispatcherImpl.write0(Native Method)
[2026-12-06 09:00:00,003] ERROR Error while flushing log for orders-3 in dir /data (org.apache.kafka.storage.internals.log.LogDirFailureChannel)
java.io.IOException: No space left on device
[2026-12-06 09:00:01,000] ERROR Shutdown broker because all log dirs in /data have failed (kafka.log.LogManager)
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LogLines(context.Background(), localHosts{}, 1, path, ENOSPC, 2)
	want := []string{
		"[2026-12-06 09:00:00,002] ERROR Error while appending records to orders-2 in dir /data (org.apache.kafka.storage.internals.log.LogDirFailureChannel) | java.io.IOException: No space left on device",
		"[2026-12-06 09:00:00,003] ERROR Error while flushing log for orders-3 in dir /data (org.apache.kafka.storage.internals.log.LogDirFailureChannel) | java.io.IOException: No space left on device",
	}
	if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("the path ran as code")
	}
	if _, err := LogLines(context.Background(), localHosts{}, 1, filepath.Join(dir, "none.log"), ENOSPC, 2); err == nil || !strings.Contains(err.Error(), "not there, or not readable") {
		t.Fatalf("a missing file: %v", err)
	}
	if got, err := LogLines(context.Background(), localHosts{}, 1, path, "no such text", 2); err != nil || len(got) != 0 {
		t.Fatalf("no line holds it: %q, %v", got, err)
	}
}
