package inventory

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestZZTime(t *testing.T) {
	files, _ := filepath.Glob("/root/.cache/go-build/fuzz/github.com/kremedy/kremedy/inventory/FuzzParse/*")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.SplitN(string(b), "\n", 3)
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil { t.Log(f, err); continue }
		st := time.Now()
		Parse("x", []byte(s))
		if el := time.Since(st); el > 50*time.Millisecond { t.Logf("%v %d %q", el, len(s), s[:min(len(s), 200)]) }
	}
}
