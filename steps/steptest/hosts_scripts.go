package steptest

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SizedAt is when the fake hosts say every directory last changed.
var SizedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// scriptKind is one kind of script kremedy writes, as the fake hosts play
// it on their filesystem.
type scriptKind struct {
	// is says whether a script is of this kind.
	is func(script string) bool
	// play plays the script on broker's fake filesystem.
	play func(h *Hosts, broker int32, script string, emit func(string)) error
}

// scriptKinds are the scripts the fake plays, tried in order: the first
// whose is holds plays the script.
var scriptKinds = []scriptKind{
	{prefix("kremedy_sizes() {"), (*Hosts).playSizes},
	{prefix("kremedy_list() {"), (*Hosts).playList},
	{prefix("kremedy_move() {"), (*Hosts).playMove},
	{backRe.MatchString, (*Hosts).playRestore},
	{asideRe.MatchString, (*Hosts).playAside},
	{whereRe.MatchString, (*Hosts).playWhere},
	{prefix("kremedy_space() {"), (*Hosts).playSpace},
	{prefix("kremedy_quarantine() {"), (*Hosts).playQuarantine},
	{prefix("kremedy_lines() {"), (*Hosts).playLines},
}

// prefix is a scriptKind's is for the scripts that start with p.
func prefix(p string) func(string) bool {
	return func(s string) bool { return strings.HasPrefix(s, p) }
}

// script plays one of kremedy's scripts on the fake filesystem (see
// scriptKinds); any other script fails the test.
func (h *Hosts) script(broker int32, script string, emit func(string)) error {
	for _, k := range scriptKinds {
		if k.is(script) {
			return k.play(h, broker, script, emit)
		}
	}
	h.t.Errorf("unexpected command on broker %d: %q", broker, script)
	return &ExitErr{127}
}

// sizesRe is the call of a size listing (steps/remote's sizes script).
var sizesRe = regexp.MustCompile(`(?m)^kremedy_sizes (.+)$`)

// playSizes plays a size listing: every directory the fake holds is 4 KiB,
// changed at SizedAt; a path it does not hold is -1.
func (h *Hosts) playSizes(broker int32, script string, emit func(string)) error {
	m := sizesRe.FindStringSubmatch(script)
	if m == nil {
		h.t.Errorf("kremedy_sizes on broker %d names no path: %q", broker, script)
		return &ExitErr{2}
	}
	for _, w := range strings.Fields(m[1]) {
		if p := unquote(w); h.has(broker, p) {
			emit(fmt.Sprintf("4\t%d\t%s", SizedAt.Unix(), p))
		} else {
			emit("-1\t-1\t" + p)
		}
	}
	return nil
}

// listRe is one log dir's line of a listing script: its tag, index and
// path.
var listRe = regexp.MustCompile(`(?m)^kremedy_list (\S+) (\d+) (\S+)$`)

// playList plays a log-dir listing: for each directory it names, the
// script's own lines ("K<tag>\t<index>\t" then a, l, m, e) around the
// access Unwritable scripts, the entries as ls -Apq prints them and the
// topic ids as grep prints them from partition.metadata; "x" for a
// directory the fake does not hold.
func (h *Hosts) playList(broker int32, script string, emit func(string)) error {
	for _, m := range listRe.FindAllStringSubmatch(script, -1) {
		own := "K" + m[1] + "\t" + m[2] + "\t"
		dir := unquote(m[3])
		ents, ok := h.FS[broker][dir]
		if !ok {
			emit(own + "x\t\t")
			continue
		}
		access := "ok"
		if a := h.Unwritable[broker][dir]; a != "" {
			h.answered(response{kind: "Unwritable", node: broker, dir: dir})
			access = a
		}
		emit(own + "a\t" + access + "\t")
		names := slices.Sorted(maps.Keys(ents))
		emit(own + "l\t\t")
		for _, n := range names {
			if ents[n].IsDir {
				n += "/"
			}
			emit(n)
		}
		emit(own + "m\t\t")
		for _, n := range names {
			if e := ents[n]; e.IsDir && e.TopicID != "" {
				emit(n + "/partition.metadata:topic_id: " + e.TopicID)
			}
		}
		emit(own + "e\t\t")
	}
	return nil
}

// moveRe is one move of a quarantine script: source and destination.
var moveRe = regexp.MustCompile(`(?m)^kremedy_move (\S+) (\S+) \|\| exit \$\?$`)

// playMove plays a quarantine move of each directory it names. A stray
// cleanup's script (it defines kremedy_straycheck) refuses, on the host,
// any source not named -stray, and only those may move while the broker
// runs; any other move while the broker runs fails the test. A source
// already at its destination is reported in quarantine; one found nowhere
// exits 1.
func (h *Hosts) playMove(broker int32, script string, emit func(string)) error {
	strays := isStrayScript(script)
	for _, m := range moveRe.FindAllStringSubmatch(script, -1) {
		src, dst := unquote(m[1]), unquote(m[2])
		if strays {
			if !strings.HasSuffix(src, "-stray") {
				emit("refusing: " + src + " is not a -stray directory")
				return &ExitErr{6}
			}
		} else if h.Running[broker] {
			h.t.Errorf("move %s on broker %d while it runs", src, broker)
		}
		if !h.moveEntry(broker, src, dst) {
			if h.has(broker, dst) {
				emit("in quarantine: " + src + " -> " + dst)
				continue
			}
			return &ExitErr{1}
		}
		emit("moved " + src + " -> " + dst)
	}
	return nil
}

// backRe is a restore script's head: source (in quarantine) and
// destination (in the log dir).
var backRe = regexp.MustCompile(`(?sm)^set -e\nsrc=(\S+); dst=(\S+)\n`)

// playRestore plays a segments restore, a quarantined directory moved
// back: a stray cleanup's refuses (exit 6) a destination not named -stray,
// any other restore while the broker runs fails the test; it exits 3 when
// the destination exists and 1 when the source does not.
func (h *Hosts) playRestore(broker int32, script string, emit func(string)) error {
	m := backRe.FindStringSubmatch(script)
	src, dst := unquote(m[1]), unquote(m[2])
	if strays := isStrayScript(script); strays && !strings.HasSuffix(dst, "-stray") {
		return &ExitErr{6}
	} else if !strays && h.Running[broker] {
		h.t.Errorf("restore %s on broker %d while it runs", src, broker)
	}
	if h.has(broker, dst) {
		return &ExitErr{3}
	}
	if !h.moveEntry(broker, src, dst) {
		return &ExitErr{1}
	}
	emit("moved back " + src + " -> " + dst)
	return nil
}

// asideRe is the migration revert's move of the KRaft metadata log out of
// a log dir (migrate's metadataScript).
var asideRe = regexp.MustCompile(`(?m)^if \[ -e (\S+) \]; then mv -- (\S+) (\S+); printf 'moved %s aside\\n' (\S+); fi$`)

// playAside plays the metadata log's moves aside, each only if its source
// exists; a move naming two sources, or one while the broker runs, fails
// the test.
func (h *Hosts) playAside(broker int32, script string, emit func(string)) error {
	for _, m := range asideRe.FindAllStringSubmatch(script, -1) {
		src, dst := unquote(m[1]), unquote(m[3])
		if unquote(m[2]) != src || unquote(m[4]) != src {
			h.t.Errorf("metadata move on broker %d names two sources: %q", broker, m[0])
			return &ExitErr{2}
		}
		if h.Running[broker] {
			h.t.Errorf("move %s on broker %d while it runs", src, broker)
		}
		if h.moveEntry(broker, src, dst) {
			emit("moved " + src + " aside")
		}
	}
	return nil
}

// whereRe is a where-is-it check's head: destination and source.
var whereRe = regexp.MustCompile(`^if \[ -e (\S+) \] && \[ ! -e (\S+) \]`)

// playWhere plays a where-is-it check of a move: "moved" when only the
// destination exists, "source" while the source does, "missing" when
// neither does.
func (h *Hosts) playWhere(broker int32, script string, emit func(string)) error {
	m := whereRe.FindStringSubmatch(script)
	src, dst := unquote(m[2]), unquote(m[1])
	atDst, atSrc := h.has(broker, dst), h.has(broker, src)
	switch {
	case atDst && !atSrc:
		emit("moved")
	case atSrc:
		emit("source")
	default:
		emit("missing")
	}
	return nil
}

// isStrayScript says whether a script is a stray cleanup's: it defines
// the host-side check that refuses any directory not named -stray.
func isStrayScript(script string) bool {
	return strings.Contains(script, "kremedy_straycheck() {")
}

// has says whether broker's fake filesystem holds path p.
func (h *Hosts) has(broker int32, p string) bool {
	_, ok := h.FS[broker][filepath.Dir(p)][filepath.Base(p)]
	return ok
}

// moveEntry moves the entry at src to dst on broker's fake filesystem
// (making dst's directory if need be); false when src holds none.
func (h *Hosts) moveEntry(broker int32, src, dst string) bool {
	sd, sn, dd, dn := filepath.Dir(src), filepath.Base(src), filepath.Dir(dst), filepath.Base(dst)
	e, ok := h.FS[broker][sd][sn]
	if !ok {
		return false
	}
	delete(h.FS[broker][sd], sn)
	if h.FS[broker][dd] == nil {
		h.FS[broker][dd] = map[string]Entry{}
	}
	h.FS[broker][dd][dn] = e
	return true
}

// unquote decodes a word the scripts' regexps captured.
func unquote(s string) string {
	if w, ok := shellWord(s); ok {
		return w
	}
	return s
}

// shellWord decodes one POSIX shell word made of bare characters,
// single-quoted runs and backslash escapes (what shell.Quote produces).
func shellWord(w string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		switch c := w[i]; c {
		case '\\':
			if i+1 == len(w) {
				return "", false
			}
			i++
			b.WriteByte(w[i])
		case '\'':
			j := strings.IndexByte(w[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(w[i+1 : i+1+j])
			i += j + 1
		case ' ', '\t', '\n', ';', '&', '|', '$', '`', '"':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// linesRe is the call of a log reading (brokers.LogLinesScript): the
// path, the fixed string and how many lines, each a shell word.
var linesRe = regexp.MustCompile(`(?m)^kremedy_lines ((?:'[^']*'|\\.|[^\s'\\])+) ((?:'[^']*'|\\.|[^\s'\\])+) (\d+)$`)

// playLines plays a log reading as grep -B1 and tail print it: each line
// of Logs[broker][path] that holds the string, after the line before it,
// "--" between groups that do not touch; the last n lines of that. A path
// with no entry is a file that is not there (exit 3).
func (h *Hosts) playLines(broker int32, script string, emit func(string)) error {
	m := linesRe.FindStringSubmatch(script)
	if m == nil {
		h.t.Errorf("kremedy_lines on broker %d: no path, string and count: %q", broker, script)
		return &ExitErr{2}
	}
	lines, ok := h.Logs[broker][unquote(m[1])]
	if !ok {
		return &ExitErr{3}
	}
	var out []string
	last := -1 // the last line printed
	for i, l := range lines {
		if !strings.Contains(l, unquote(m[2])) {
			continue
		}
		from := max(i-1, last+1)
		if last >= 0 && from > last+1 {
			out = append(out, "--")
		}
		out = append(out, lines[from:i+1]...)
		last = i
	}
	n, _ := strconv.Atoi(m[3])
	for _, l := range out[max(0, len(out)-n):] {
		emit(l)
	}
	return nil
}
