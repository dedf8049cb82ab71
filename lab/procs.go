package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// alive reports whether pid runs and is not a zombie. Orphaned lab
// processes may be reparented to an init that never reaps them, so a plain
// kill(pid, 0) would call a zombie alive.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	st := b[i+2]
	return st != 'Z' && st != 'X'
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// procsWith lists live processes whose command line has an argument equal
// to arg.
func procsWith(arg string) []int {
	return procsMatching(func(args []string) bool { return slices.Contains(args, arg) })
}

// procsContaining lists live processes whose whole command line contains
// sub. sshd rewrites its process title into one string ("sshd: /usr/sbin/sshd
// -f CONFIG [listener] …"), so it is found this way.
func procsContaining(sub string) []int {
	return procsMatching(func(args []string) bool {
		// Only sshd itself (its rewritten title starts "sshd:", or argv[0]
		// is sshd): never an editor or a tail that has the config open.
		if len(args) == 0 || !(strings.HasPrefix(args[0], "sshd:") || filepath.Base(args[0]) == "sshd") {
			return false
		}
		return strings.Contains(strings.Join(args, " "), sub)
	})
}

func procsMatching(match func([]string) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || !alive(pid) {
			continue
		}
		if match(cmdline(pid)) {
			out = append(out, pid)
		}
	}
	return out
}

func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// spawnDetached starts argv in its own session, detached from this process
// (double fork through sh), so it survives kremedy and is reaped by init.
func spawnDetached(dir, logFile string, argv []string) (int, error) {
	script := `cd "$1" || exit 1; log=$2; shift 2; setsid "$@" >>"$log" 2>&1 </dev/null & echo $!`
	out, err := exec.Command("/bin/sh", append([]string{"-c", script, "sh", dir, logFile}, argv...)...).Output()
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", filepath.Base(argv[0]), err)
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}

// terminate sends SIGTERM, waits up to grace, then SIGKILLs. It reports
// whether the kill was needed.
func terminate(pid int, grace time.Duration) (killed bool) {
	if !alive(pid) {
		return false
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && alive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// addrInUse reports whether host:port cannot be bound because something
// already listens there.
func addrInUse(host string, port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return errors.Is(err, syscall.EADDRINUSE)
	}
	ln.Close()
	return false
}

// listening reports whether something accepts connections on host:port.
func listening(host string, port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), 300*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// waitFor polls cond (for process and port states, which have no watch)
// until it holds or ctx ends.
func waitFor(ctx context.Context, every time.Duration, cond func() bool) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// fourLetter sends a ZooKeeper four-letter command and returns the answer.
func fourLetter(host string, port int, cmd string) string {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), 500*time.Millisecond)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return ""
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(c)
	return buf.String()
}
