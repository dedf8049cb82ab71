package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// stopJVM stops a lab JVM with its stop script (a controlled shutdown of
// up to 30 s), and with SIGKILL when that fails.
func stopJVM(ctx context.Context, script string, pid int, label string, out io.Writer) {
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if b, err := exec.CommandContext(sctx, script, "30").CombinedOutput(); err != nil {
		fmt.Fprintf(out, "  %s  did not stop cleanly (%v): %s; killing pid %d\n", label, err, firstLine(b), pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return
	}
	fmt.Fprintf(out, "  %s  stopped\n", label)
}

// Down stops every process the lab started — brokers with a controlled
// shutdown first, then ZooKeeper and sshd — and finally sweeps for any
// process still carrying the lab's marker, so no JVM is left behind even
// when pid files are lost. With purge it removes the directory, but only a
// directory that holds a kremedy lab.
func Down(ctx context.Context, dir string, purge bool, out io.Writer) error {
	out = &lockedWriter{w: out} // brokers stop in parallel, each saying so
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	l, err := Open(abs)
	if errors.Is(err, ErrNoLab) {
		if n := sweep(abs, out); n == 0 {
			fmt.Fprintf(out, "no lab in %s; nothing to stop\n", abs)
		}
		return nil
	}
	if err != nil {
		// Another layout or a corrupt state file: still stop what runs,
		// but delete nothing unless it is recognisably a kremedy lab.
		fmt.Fprintf(out, "warning: %v\n", err)
		sweep(abs, out)
		if purge {
			if !errors.Is(err, ErrOtherVersion) || !looksLikeLab(abs) {
				return fmt.Errorf("refusing to purge %s: its lab.json is not a kremedy lab's; nothing was deleted", abs)
			}
			return purgeDir(abs, out)
		}
		return nil
	}
	c := l.State.Config
	var wg sync.WaitGroup
	for n := 1; n <= c.Brokers; n++ {
		pid := l.brokerPID(n)
		if pid == 0 {
			continue
		}
		wg.Add(1)
		go func(n, pid int) {
			defer wg.Done()
			stopJVM(ctx, l.StopScript(n), pid, fmt.Sprintf("broker    %d", n), out)
		}(n, pid)
	}
	wg.Wait()
	l.stopControllers(ctx, out)
	l.stopKDC(out)
	for n := 1; n <= c.ZooKeepers; n++ {
		if pid := l.zkPID(n); pid > 0 {
			killed := terminate(pid, 10*time.Second)
			fmt.Fprintf(out, "  zookeeper %d  stopped%s\n", n, map[bool]string{true: " (SIGKILL after 10s)"}[killed])
		}
	}
	for _, n := range l.sshHosts() {
		if pid := l.sshdPID(n); pid > 0 {
			terminate(pid, 5*time.Second)
			fmt.Fprintf(out, "  %s  stopped\n", sshLabel(n))
		}
	}
	sweep(abs, out)
	l.unmountLogDirs(out)
	if purge {
		return purgeDir(abs, out)
	}
	fmt.Fprintf(out, "lab in %s is down; its data is kept (`kremedy lab up --dir %s` resumes it, --purge removes it)\n", abs, abs)
	return nil
}

// sweep kills any process still marked as this lab's (JVMs by their -D
// marker, sshd by its config path) and returns how many there were.
func sweep(dir string, out io.Writer) int {
	pids := procsWith("-Dkremedy.lab=" + dir)
	pids = append(pids, procsContaining(filepath.Join(dir, "sshd")+"/")...)
	pids = append(pids, procsContaining(filepath.Join(dir, "kerberos", "krb5kdc.pid"))...)
	for _, p := range pids {
		fmt.Fprintf(out, "  killing leftover lab process %d: %v\n", p, cmdline(p)[:min(3, len(cmdline(p)))])
		terminate(p, 3*time.Second)
	}
	return len(pids)
}

// looksLikeLab reports a directory with a kremedy lab's layout: a
// ZooKeeper lab's zk/ or a KRaft lab's controller/ beside the rest.
func looksLikeLab(dir string) bool {
	for _, p := range []string{"lab.json", "inventory.yaml", "broker", "sshd"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return false
		}
	}
	for _, p := range []string{"zk", "controller"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return true
		}
	}
	return false
}

func purgeDir(dir string, out io.Writer) error {
	home, _ := os.UserHomeDir()
	if dir == "/" || dir == home || !looksLikeLab(dir) {
		return fmt.Errorf("refusing to purge %s: it does not have a kremedy lab's layout (lab.json, inventory.yaml, broker/, sshd/, and zk/ or controller/); nothing was deleted", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("purge %s: %w", dir, err)
	}
	fmt.Fprintf(out, "lab in %s is down and removed\n", dir)
	return nil
}

func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}

// lockedWriter serializes the writes of the parallel stops to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
