package steptest

import (
	"fmt"
	"regexp"
)

// spaceRe is one log dir's call in a space reading (brokers.SpaceScript).
var spaceRe = regexp.MustCompile(`(?m)^kremedy_space (\S+)$`)

// playSpace plays a space reading: for each dir, the lines a test set in
// Space[broker][dir] (brokers.ParseSpace's "df …" and "f …" lines), else a
// 1 GiB filesystem 1% used with no partition files.
func (h *Hosts) playSpace(broker int32, script string, emit func(string)) error {
	for _, m := range spaceRe.FindAllStringSubmatch(script, -1) {
		dir := unquote(m[1])
		emit("dir " + dir)
		lines, ok := h.Space[broker][dir]
		if !ok {
			lines = []string{fmt.Sprintf("df fake 1048576 10240 1038336 1%% %s", dir)}
		}
		for _, l := range lines {
			emit(l)
		}
	}
	return nil
}
