package roll

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// RunOn runs a command on a node's host (a broker, or a KRaft controller
// by its node id), streaming and journaling its output.
func RunOn(ctx context.Context, env *steps.Env, node int32, cmd string) error {
	h, ok := env.Target.Host(node)
	host := fmt.Sprintf("broker %d (%s)", node, h.Host)
	if c, isCtrl := env.Target.Controller(node); !ok && isCtrl {
		host = fmt.Sprintf("controller %d (%s)", node, c.Host)
	}
	return env.Hosts.Run(ctx, node, cmd, func(l ports.Line) { env.Output(host, l) })
}

// CheckCluster is brokers.CheckCluster as a preflight's check: the check
// it passed (Name empty when it did not get that far), the cluster's id.
func CheckCluster(ctx context.Context, env *steps.Env, priorID, migrating string) (string, steps.Check, error) {
	id, passed, err := brokers.CheckCluster(ctx, env.ZK, env.Target.ZKConnect, env.Inventory(), priorID, migrating)
	var c steps.Check
	if passed != "" {
		c = steps.Check{Name: brokers.ClusterCheckName, OK: true, Detail: passed}
	}
	return id, c, err
}

// WaitGone waits for broker id's registration to vanish (read every 100 ms)
// and its port addr to close, and logs how long after the stop command
// it went.
func WaitGone(ctx context.Context, env *steps.Env, id int32, addr string, timeout time.Duration) error {
	start := env.Now()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := env.ProgressEvery(5*time.Second, func() string {
		return fmt.Sprintf("waiting for broker %d to leave %s%s (its controlled shutdown moves leadership away first): %s of %s", id, env.ZK.Chroot(), kafkazk.BrokerIDsPath, env.Now().Sub(start).Round(time.Second), timeout)
	})
	_, err := env.ZK.WaitChildren(wctx, kafkazk.BrokerIDsPath, func(kids []string) bool { return !slices.Contains(kids, fmt.Sprint(id)) })
	stop()
	if err != nil {
		return fmt.Errorf("broker %d's stop command succeeded but %s%s/%d is still present after %s: %w", id, env.ZK.Chroot(), kafkazk.BrokerIDsPath, id, timeout, err)
	}
	gone := env.Now().Sub(start)
	if addr != "" {
		for i := 0; env.Kafka.Listening(ctx, addr); i++ {
			if i > 100 {
				return fmt.Errorf("broker %d: %s still accepts connections 10s after its registration vanished; something still runs there", id, addr)
			}
			if err := env.Sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
	}
	env.Logf("broker %d stopped: registration gone %s after the command returned, port %s closed", id, gone.Round(time.Millisecond), text.OrDash(addr))
	ReportDown(ctx, env)
	return nil
}

// ReportDown says how many of the inventory's brokers are not registered
// in ZooKeeper now (Env.BrokersDown): the outage the operator watches.
func ReportDown(ctx context.Context, env *steps.Env) {
	reg, err := brokers.Registered(ctx, env.ZK)
	if err != nil {
		return
	}
	inv := brokers.HostIDs(env.Target)
	down := 0
	for _, id := range inv {
		if !slices.Contains(reg, id) {
			down++
		}
	}
	env.BrokersDown(down, len(inv))
}

// Hold runs check until n rounds in a row pass, or timeout (then
// ErrCheckFailed naming what failed last), reporting progress every five
// seconds. check returns a round's checks and how long such a round
// typically takes to read (readViews: the median broker's answer, once per
// wave of brokers asked at once). Passing rounds are a second apart, so
// that n of them span n-1 seconds: the time a state must hold to count.
// After a failing round the next comes sooner (retryAfter): a cluster that
// heals, such as a restarted broker back in every ISR, is seen within
// 200 ms of it on a small cluster rather than up to a second later.
func Hold(ctx context.Context, env *steps.Env, check func() ([]steps.Check, time.Duration), n int, timeout time.Duration) ([]steps.Check, error) {
	start := env.Now()
	told := start
	streak := 0
	var last []steps.Check
	for {
		var read time.Duration
		last, read = check()
		next := time.Second
		if steps.AllOK(last) {
			if streak++; streak >= n {
				return last, nil
			}
		} else {
			streak, next = 0, retryAfter(read)
		}
		if env.Now().Sub(told) >= 5*time.Second {
			told = env.Now()
			env.Progress("%s", GateProgress(last, streak, n, env.Now().Sub(start), timeout))
		}
		if env.Now().Sub(start) > timeout || ctx.Err() != nil {
			return last, fmt.Errorf("%w: the cluster was not healthy within %s: %s", steps.ErrCheckFailed, timeout, steps.Failing(last))
		}
		_ = env.Sleep(ctx, next) // a cancelled ctx ends the loop above
	}
}

// retryAfter is how long a health gate waits after a failing round that
// typically takes read: twice that, at least 200 ms and at most the second
// between passing rounds, so that reading takes at most a third of the
// time. A small cluster is asked again five times a second while it heals;
// a big one, whose rounds take long, never has its brokers asked back to
// back. Typical, not this round's: a broker just restarted answers its
// first request slowly (a cold process, a new connection) and should not
// hold back the next round.
func retryAfter(read time.Duration) time.Duration {
	return min(max(2*read, 200*time.Millisecond), time.Second)
}

// GateProgress says, while a health gate waits, what it waits for: the
// checks that fail now with their details, or the passing rounds still
// needed.
func GateProgress(last []steps.Check, streak, need int, waited, timeout time.Duration) string {
	var bad []string
	for _, c := range last {
		if !c.OK {
			bad = append(bad, fmt.Sprintf("%s (%s)", c.Name, c.Detail))
		}
	}
	head := fmt.Sprintf("health gate, %s of %s: ", waited.Round(time.Second), timeout)
	if len(bad) == 0 {
		return head + fmt.Sprintf("healthy, %d of %d checks in a row", streak, need)
	}
	return head + "waiting for: " + strings.Join(bad, "; ")
}

// WaitFor polls cond once a second until it holds or timeout passes,
// reporting progress every five rounds.
func WaitFor(ctx context.Context, env *steps.Env, timeout time.Duration, what string, cond func() (bool, string)) error {
	start := env.Now()
	for round := 1; ; round++ {
		ok, why := cond()
		if ok {
			return nil
		}
		if round%5 == 0 {
			env.Progress("waiting for %s: %s (%s of %s)", what, why, env.Now().Sub(start).Round(time.Second), timeout)
		}
		if env.Now().Sub(start) > timeout {
			return fmt.Errorf("%w: %s not within %s: %s", steps.ErrCheckFailed, what, timeout, why)
		}
		if err := env.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}
