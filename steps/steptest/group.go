package steptest

import (
	"bufio"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ForeignGroup is a group of /etc/group this process is not in (a run
// directory cannot be shared with it: the shared-run tests' refusal).
func ForeignGroup(t testing.TB) string {
	t.Helper()
	f, err := os.Open("/etc/group")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mine, _ := os.Getgroups()
	mine = append(mine, os.Getegid())
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), ":")
		if len(p) < 3 {
			continue
		}
		if gid, err := strconv.Atoi(p[2]); err == nil && !slices.Contains(mine, gid) {
			if _, err := user.LookupGroup(p[0]); err == nil {
				return p[0]
			}
		}
	}
	t.Fatal("/etc/group has no group this process is not in")
	return ""
}
