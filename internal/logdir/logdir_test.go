package logdir

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{"/var/lib/kafka/data", "/data/kafka-logs_1", "/mnt/disk.2/k+a@b=c:d", "/a"} {
		if err := Check(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for dir, why := range map[string]string{
		"data": "absolute", "/data/": "clean", "/a/../b": "clean", "/": "root",
		"/k[1]": `'['`, "/k]": `']'`, "/k*": `'*'`, "/k?": `'?'`, `/k\x`: `'\\'`, "/$(id)": `'$'`, "/k`id`": "'`'",
		`/k"x`: `'"'`, "/k'x": `'\''`, "/k x": `' '`, "/k\nx": `'\n'`, "/k\tx": `'\t'`, "/a,/b": "','", "/ünï": "'ü'", "/k;x": "';'",
		"/k~": "'~'", "/k#": "'#'", "/k%": "'%'", "/k&x": "'&'", "/k|x": "'|'", "/k<x": "'<'", "/k{a}": "'{'", "/k!": "'!'",
	} {
		err := Check(dir)
		if !errors.Is(err, ErrPath) || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v; want an ErrPath naming %s", dir, err, why)
		}
	}
}
