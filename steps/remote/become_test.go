package remote

import (
	"context"
	"encoding/hex"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// needUser fails (never skips) when a lab user is missing: make test
// creates them (lab/install-users.sh).
func needUser(t *testing.T, name string) {
	t.Helper()
	if _, err := user.Lookup(name); err != nil {
		t.Fatalf("user %s: %v: run `make lab-users` as root (lab/install-users.sh creates the lab's operator logins)", name, err)
	}
}

// TestBecomeSudo logs in to a real sshd as a non-root operator, as on a
// production broker host, and runs kremedy's commands and its own log-dir
// listing with and without `become: sudo`.
func TestBecomeSudo(t *testing.T) {
	needSSHD(t)
	needUser(t, "kremedy-op")
	needUser(t, "kremedy-nosudo")
	s := startSSHD(t)
	// Kafka's data as a service user keeps it: a log dir only root (here)
	// may enter, and one the operator may read but not write.
	base, err := os.MkdirTemp("", "kremedy-become-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	private := filepath.Join(base, "private")
	readonly := filepath.Join(base, "readonly")
	os.MkdirAll(filepath.Join(private, "orders-0"), 0o700)
	os.Chmod(private, 0o700)
	os.MkdirAll(filepath.Join(readonly, "orders-0"), 0o755)
	os.Chmod(readonly, 0o755)

	fleet := func(login, become string) *Fleet {
		tg := s.target(t)
		tg.User, tg.Become = login, become
		f := NewFleet(map[int32]Target{1: tg}, nil)
		t.Cleanup(f.Close)
		return f
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	uid := func(f *Fleet) (string, error) {
		var out []string
		err := f.Run(ctx, 1, shell.Script("id -u"), func(l ports.Line) { out = append(out, l.Text) })
		return strings.Join(out, ""), err
	}
	target := ports.Target{Hosts: []ports.Host{{ID: 1, Host: s.host, LogDirs: []string{private}}}}

	op, opSudo := fleet("kremedy-op", ""), fleet("kremedy-op", BecomeSudo)
	if id, err := uid(op); err != nil || id == "0" {
		t.Fatalf("as the login user: uid %q, %v", id, err)
	}
	if id, err := uid(opSudo); err != nil || id != "0" {
		t.Fatalf("become sudo: uid %q, %v", id, err)
	}
	if err := opSudo.Check(ctx, 1); err != nil {
		t.Fatalf("Check through sudo: %v", err)
	}
	// An input passes through sudo to the command as root, whole.
	secret := []byte("ssl.keystore.password=s3cret\nno final newline")
	var got []string
	if err := opSudo.RunInput(ctx, 1, shell.Script("id -u; od -An -v -tx1 | tr -d ' \\n'; echo"), secret, func(l ports.Line) { got = append(got, l.Text) }); err != nil {
		t.Fatalf("RunInput through sudo: %v", err)
	}
	if len(got) != 2 || got[0] != "0" || got[1] != hex.EncodeToString(secret) {
		t.Fatalf("RunInput through sudo read %q, want uid 0 and %x", got, secret)
	}

	// The listing as the login user cannot enter the service user's dir
	// and says what to do; through sudo it lists it and may move out of it.
	l := brokers.List(ctx, op, target, map[int32][]string{1: {private}})
	if err := l.Err(target); !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "cannot enter") || !strings.Contains(err.Error(), "become: sudo") {
		t.Fatalf("listing a private log dir without sudo: %v", err)
	}
	l = brokers.List(ctx, opSudo, target, map[int32][]string{1: {private, readonly}})
	if err := l.Err(target); err != nil || len(l.Entries[1][private]) != 1 || len(l.Unwritable[1]) != 0 {
		t.Fatalf("listing through sudo: %v %+v unwritable %v", err, l.Entries, l.Unwritable)
	}
	l = brokers.List(ctx, op, target, map[int32][]string{1: {readonly}})
	if err := l.Err(target); err != nil || l.Unwritable[1][readonly] != "dir" {
		t.Fatalf("a log dir the login user may read but not write: %v, unwritable %v", err, l.Unwritable)
	}

	// A login without sudo rights: refused before anything runs, in words
	// that say what to do.
	nosudo := fleet("kremedy-nosudo", BecomeSudo)
	marker := filepath.Join(base, "ran")
	err = nosudo.Run(ctx, 1, shell.Script("touch "+shell.Quote(marker)), nil)
	var se *SudoError
	if !errors.As(err, &se) || !errors.Is(err, ErrSudo) || !strings.Contains(err.Error(), "a password is required") ||
		!strings.Contains(err.Error(), "did not run") || !strings.Contains(err.Error(), "NOPASSWD") {
		t.Fatalf("sudo without rights: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused command ran")
	}
	if err := nosudo.Check(ctx, 1); !errors.Is(err, ErrSudo) {
		t.Fatalf("Check through sudo without rights: %v", err)
	}
}
