package journal

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// crashChildEnv holds the journal path when the test binary runs as the
// child of TestKillRecovery.
const crashChildEnv = "KREMEDY_JOURNAL_CRASH_CHILD"

type crashData struct {
	I   int    `json:"i"`
	Pad string `json:"pad"`
}

// TestKillRecovery re-runs the test binary as a child that opens the journal
// and appends records of up to 16 KiB in a loop, reporting each Seq that
// Append acknowledged on a pipe. The parent kills it with SIGKILL after a
// random number of acknowledgements, likely in the middle of a write, then
// checks that every acknowledged record is there, that Read and Open agree,
// and that Open leaves a journal that takes the next Append. Five rounds.
func TestKillRecovery(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	path := newPath(t)
	j := mustCreate(t, path)
	mustAppend(t, j, RunStart, "", nil)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	torn := 0
	for round := range 5 {
		acked := runAndKill(t, path, 3+rand.IntN(20))

		before := readFile(t, path)
		recs := mustRead(t, path)
		if readFile(t, path) != before {
			t.Fatalf("round %d: Read changed the file", round)
		}
		if last := recs[len(recs)-1].Seq; last < acked {
			t.Fatalf("round %d: the child was acknowledged seq %d but the journal ends at %d", round, acked, last)
		}
		for _, rec := range recs[1:] {
			if rec.Type == Output {
				if _, err := Decode[crashData](rec); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
		}

		j, orecs, err := Open(path)
		if err != nil {
			t.Fatalf("round %d: Open after SIGKILL: %v", round, err)
		}
		if len(orecs) != len(recs) {
			t.Fatalf("round %d: Open returned %d records, Read %d", round, len(orecs), len(recs))
		}
		if len(readFile(t, path)) < len(before) {
			torn++
		}
		rec := mustAppend(t, j, Interrupted, "", map[string]int{"round": round})
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if after := mustRead(t, path); len(after) != len(recs)+1 || !sameRecord(after[len(after)-1], rec) {
			t.Fatalf("round %d: after Open and Append, Read returned %d records, want %d", round, len(after), len(recs)+1)
		}
	}
	t.Logf("%d of 5 kills left a torn last line", torn)
}

// runAndKill starts the child, kills it after n acknowledged appends and
// returns the last acknowledged Seq.
func runAndKill(t *testing.T, path string, n int) int64 {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillRecovery$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the child
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	var acked int64
	sc := bufio.NewScanner(r)
	for i := 0; i < n && sc.Scan(); i++ {
		if acked, err = strconv.ParseInt(sc.Text(), 10, 64); err != nil {
			t.Fatalf("child said %q", sc.Text())
		}
	}
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // land anywhere in the next Append
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	err = cmd.Wait()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v\n%s", err, stderr.String())
	}
	if acked == 0 {
		t.Fatalf("child acknowledged nothing\n%s", stderr.String())
	}
	return acked
}

// crashChild appends until it is killed, the parent goes away, or 20 s pass.
func crashChild(path string) {
	ack := os.NewFile(3, "ack")
	j, _, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		rec, err := j.Append(Output, "crash", crashData{I: i, Pad: strings.Repeat("k", rand.IntN(16<<10))})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if _, err := fmt.Fprintln(ack, rec.Seq); err != nil {
			os.Exit(3) // the parent is gone
		}
	}
	os.Exit(4)
}
