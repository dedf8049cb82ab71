package lab

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// A size-limited lab (`lab up --log-dir-size 64m`) mounts a tmpfs of that
// size on every broker's log dir, so that a scenario can fill one until
// ENOSPC (disk-full). tmpfs keeps its data in memory: `lab down` unmounts
// it, and the brokers' logs go with it.

// checkLogDirSize refuses --log-dir-size where it cannot be honoured.
func (c Config) checkLogDirSize() error {
	if c.LogDirSize == "" {
		return nil
	}
	if !heapRe.MatchString(c.LogDirSize) {
		return fmt.Errorf("--log-dir-size %q: a size such as 64m or 1g", c.LogDirSize)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("--log-dir-size %s needs root: each log dir becomes a tmpfs (mount -t tmpfs), which only root may mount; nothing was started. Run `kremedy lab up` as root, or leave --log-dir-size out", c.LogDirSize)
	}
	return nil
}

// mountLogDirs mounts a tmpfs of the lab's size on each of broker n's log
// dirs not yet mounted, owned like the directory it covers.
func (l *Lab) mountLogDirs(n int) error {
	size := l.State.Config.LogDirSize
	if size == "" {
		return nil
	}
	for _, d := range l.LogDirs(n) {
		if Mounted(d) {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(d, &st); err != nil {
			return fmt.Errorf("log dir %s: %w", d, err)
		}
		opts := fmt.Sprintf("size=%s,mode=0755,uid=%d,gid=%d", size, st.Uid, st.Gid)
		if b, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "kremedy-lab", d).CombinedOutput(); err != nil {
			return fmt.Errorf("mount a %s tmpfs on %s: %v: %s", size, d, err, strings.TrimSpace(string(b)))
		}
	}
	return nil
}

// unmountLogDirs unmounts every size-limited log dir of the lab, saying so
// on out (their data goes with them).
func (l *Lab) unmountLogDirs(out io.Writer) {
	for n := 1; n <= l.State.Config.Brokers; n++ {
		for _, d := range l.LogDirs(n) {
			if !Mounted(d) {
				continue
			}
			if b, err := exec.Command("umount", d).CombinedOutput(); err != nil {
				fmt.Fprintf(out, "  warning: umount %s: %v: %s (unmount it by hand: umount %s)\n", d, err, strings.TrimSpace(string(b)), d)
				continue
			}
			fmt.Fprintf(out, "  broker    %d  log dir %s unmounted (a tmpfs: its data is gone)\n", n, d)
		}
	}
}

// Mounted reports whether path is a mount point (listed in
// /proc/self/mounts).
func Mounted(path string) bool {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 1 && unescapeMount(fields[1]) == path {
			return true
		}
	}
	return false
}

// unescapeMount undoes /proc/mounts' octal escapes (\040 for a space).
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// sizeLimitedDefaults are the broker settings a size-limited lab adds: the
// retention check every 5 s instead of 5 min, so that space freed by
// DeleteRecords or a lower retention shows within a lab test's time.
func (l *Lab) sizeLimitedDefaults() string {
	if l.State.Config.LogDirSize == "" {
		return ""
	}
	return "log.retention.check.interval.ms=5000\n"
}
