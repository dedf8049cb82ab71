package steps

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// stepClock is a clock that moves only when a wait on it ends: After(d)
// fires at once and moves Now by d.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// TestSleepWaitsOnTheRunsClock: Env.Sleep waits on the clock Env.Now
// reads (one clock for a wait and its measurement), and ends early, with
// ctx's error, when ctx ends.
func TestSleepWaitsOnTheRunsClock(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 47, 0, 0, time.UTC)
	env := &Env{run: &run{rec: &recorder{clk: &stepClock{now: t0}}}}
	if err := env.Sleep(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := env.Now().Sub(t0); got != time.Hour {
		t.Fatalf("after Sleep(1h) the run's clock moved %s, want 1h", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := env.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with an ended ctx: %v, want context.Canceled", err)
	}
	if got := env.Now().Sub(t0); got != time.Hour {
		t.Fatalf("a Sleep whose ctx had ended waited %s", got-time.Hour)
	}

	// Production's clock is the time package's: inside a synctest bubble
	// a wait of ten seconds takes ten seconds of the bubble's time, and a
	// ctx that ends cuts it short.
	synctest.Test(t, func(t *testing.T) {
		env := &Env{run: &run{rec: &recorder{}}}
		start := env.Now()
		if err := env.Sleep(context.Background(), 10*time.Second); err != nil || env.Now().Sub(start) != 10*time.Second {
			t.Fatalf("Sleep(10s): %v after %s", err, env.Now().Sub(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start = env.Now()
		if err := env.Sleep(ctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) || env.Now().Sub(start) != 3*time.Second {
			t.Fatalf("Sleep(1m) under a 3s ctx: %v after %s", err, env.Now().Sub(start))
		}
		select {
		case <-env.After(time.Second):
		case <-time.After(2 * time.Second):
			t.Fatal("After(1s) did not fire before a 2s timer")
		}
	})
}

// TestKindsWaitOnTheRunsClock: the kind packs wait and measure only
// through Env (Now, After, Sleep, ProgressEvery), never with the time
// package's clock, so one clock governs each wait and its measurement.
// (steps/diagnose has no Env: it reads and waits on the time package,
// one clock too.)
func TestKindsWaitOnTheRunsClock(t *testing.T) {
	banned := map[string]bool{"After": true, "AfterFunc": true, "Sleep": true, "NewTimer": true, "NewTicker": true, "Tick": true,
		"Now": true, "Since": true, "Until": true}
	for _, pack := range []string{"roll", "restart", "cleanup", "migrate", "brokers"} {
		files, err := filepath.Glob(filepath.Join(pack, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", pack, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			timePkg := ""
			for _, imp := range f.Imports {
				if imp.Path.Value == `"time"` {
					timePkg = "time"
					if imp.Name != nil {
						timePkg = imp.Name.Name
					}
				}
			}
			if timePkg == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == timePkg && banned[sel.Sel.Name] {
					t.Errorf("%s: time.%s: a kind waits and measures on the run's clock (env.Now, env.After, env.Sleep)", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}
