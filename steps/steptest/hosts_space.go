package steptest

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// spaceRe is one log dir's call in a space reading (brokers.SpaceScript).
var spaceRe = regexp.MustCompile(`(?m)^kremedy_space (\S+)$`)

// playSpace plays a space reading: for each dir, the lines a test set in
// Space[broker][dir] (brokers.ParseSpace's "df …" and "f …" lines), else a
// 1 GiB filesystem 1% used with no partition files. The files of a
// partition directory the fake filesystem no longer holds there (moved to
// a quarantine) are left out, and df counts their blocks free.
func (h *Hosts) playSpace(broker int32, script string, emit func(string)) error {
	for _, m := range spaceRe.FindAllStringSubmatch(script, -1) {
		dir := unquote(m[1])
		emit("dir " + dir)
		lines, ok := h.Space[broker][dir]
		if !ok {
			lines = []string{fmt.Sprintf("df fake 1048576 10240 1038336 1%% %s", dir)}
		}
		var gone int64 // KiB
		var kept []string
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) == 3 && f[0] == "f" && !h.has(broker, path.Join(dir, strings.SplitN(f[2], "/", 2)[0])) {
				b, _ := strconv.ParseInt(f[1], 10, 64)
				gone += b / 2
				continue
			}
			kept = append(kept, l)
		}
		for _, l := range kept {
			if f := strings.Fields(l); len(f) >= 7 && f[0] == "df" && gone > 0 {
				used, _ := strconv.ParseInt(f[3], 10, 64)
				avail, _ := strconv.ParseInt(f[4], 10, 64)
				f[3], f[4] = fmt.Sprint(used-gone), fmt.Sprint(avail+gone)
				l = strings.Join(f, " ")
			}
			emit(l)
		}
	}
	return nil
}

// quarantineRe is one move of the disk-full runbook's quarantine script.
var quarantineRe = regexp.MustCompile(`(?m)^kremedy_quarantine (\S+) (\S+) \|\| exit \$\?$`)

// playQuarantine plays the disk-full quarantine's move: the entry moves
// on the fake filesystem; a move while the broker runs fails the test; a
// source already at its destination is success, one found nowhere exits 1.
func (h *Hosts) playQuarantine(broker int32, script string, emit func(string)) error {
	for _, m := range quarantineRe.FindAllStringSubmatch(script, -1) {
		src, dst := unquote(m[1]), unquote(m[2])
		if h.Running[broker] {
			h.t.Errorf("quarantine move %s on broker %d while it runs", src, broker)
		}
		if !h.moveEntry(broker, src, dst) {
			if h.has(broker, dst) {
				emit("already moved: " + src + " -> " + dst)
				continue
			}
			return &ExitErr{1}
		}
		emit("moved " + src + " -> " + dst)
	}
	return nil
}
