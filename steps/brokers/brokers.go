package brokers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// Registered lists the broker ids in /brokers/ids, sorted.
func Registered(ctx context.Context, zk ports.ZooKeeper) ([]int32, error) {
	kids, err := zk.Children(ctx, kafkazk.BrokerIDsPath)
	if err != nil {
		if zk.IsNoNode(err) {
			return nil, nil
		}
		return nil, err
	}
	var ids []int32
	for _, k := range kids {
		var id int32
		if _, err := fmt.Sscanf(k, "%d", &id); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Controller returns the active controller id, -1 when none.
func Controller(ctx context.Context, zk ports.ZooKeeper) (int32, error) {
	b, _, err := zk.Get(ctx, kafkazk.ControllerPath)
	if err != nil {
		if zk.IsNoNode(err) {
			return -1, nil
		}
		return -1, err
	}
	var z kafkazk.ControllerZNode
	if err := kafkazk.DecodeZNode(zk.Chroot()+kafkazk.ControllerPath, b, &z); err != nil {
		return -1, err
	}
	return z.BrokerID, nil
}

// ControllerZNode reads /controller; ok is false when it is absent.
func ControllerZNode(ctx context.Context, zk ports.ZooKeeper) (z kafkazk.ControllerZNode, ok bool, err error) {
	b, _, err := zk.Get(ctx, kafkazk.ControllerPath)
	if err != nil {
		if zk.IsNoNode(err) {
			return z, false, nil
		}
		return z, false, err
	}
	return z, true, kafkazk.DecodeZNode(zk.Chroot()+kafkazk.ControllerPath, b, &z)
}

// Migrated says, of a ZooKeeper-mode view of a cluster, whether the
// cluster runs in KRaft mode since a ZooKeeper → KRaft migration: a KRaft
// controller holds /controller and no broker registers in ZooKeeper any
// more (every broker a KRaft broker: dual-write or finalized). It returns
// the KRaft controller's id.
func Migrated(ctx context.Context, zk ports.ZooKeeper) (int32, bool, error) {
	z, ok, err := ControllerZNode(ctx, zk)
	if err != nil || !ok || !z.KRaft() {
		return -1, false, err
	}
	reg, err := Registered(ctx, zk)
	if err != nil || len(reg) > 0 {
		return -1, false, err
	}
	return z.BrokerID, true, nil
}

// MigratedHint is what a ZooKeeper-mode command says of a migrated
// cluster: where its KRaft inventory comes from.
const MigratedHint = "use its KRaft inventory: `kremedy run zk-to-kraft` writes RUN_DIR/inventory-kraft.yaml at finalize, or `kremedy inventory init --bootstrap HOST:PORT` writes one from the running cluster"

// Registration reads broker id's registration: its listener and the
// ZooKeeper session that owns the ephemeral znode (a new broker process
// registers with a new session). ok is false when it is not registered.
func Registration(ctx context.Context, zk ports.ZooKeeper, id int32) (reg kafkazk.BrokerRegistration, session int64, ok bool, err error) {
	b, st, err := zk.Get(ctx, fmt.Sprintf("%s/%d", kafkazk.BrokerIDsPath, id))
	if err != nil {
		if zk.IsNoNode(err) {
			return reg, 0, false, nil
		}
		return reg, 0, false, err
	}
	if err := kafkazk.DecodeZNode(zk.Chroot()+kafkazk.BrokerIDsPath, b, &reg); err != nil {
		return reg, st.EphemeralOwner, true, err
	}
	return reg, st.EphemeralOwner, true, nil
}

// Addr is broker id's Kafka listener from its registration, else fallback
// (what an earlier read or the inventory knows).
func Addr(ctx context.Context, zk ports.ZooKeeper, id int32, fallback string) string {
	reg, _, ok, err := Registration(ctx, zk, id)
	if err != nil || !ok {
		return fallback
	}
	return reg.Addr()
}

// HostIDs lists the inventory's broker ids, sorted.
func HostIDs(t ports.Target) []int32 {
	var ids []int32
	for _, h := range t.Hosts {
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	return ids
}

// ExitStatus extracts a remote command's exit status, if err carries one.
func ExitStatus(err error) (int, bool) {
	var es interface{ ExitStatus() int }
	if errors.As(err, &es) {
		return es.ExitStatus(), true
	}
	return 0, false
}

// StuckStop is the way forward when a node's stop command failed: what
// to read, and what to do when a shutdown hangs. A Kafka JVM can hang
// in its shutdown for minutes (seen after its ZooKeeper session expired
// mid-shutdown); killing it is safe for its data, since Kafka recovers
// an unclean log at the next start, only slower.
func StuckStop(noun string, id int32, on string) string {
	return fmt.Sprintf("Read its server log on %s; if its shutdown hangs, stop the JVM of %s %d by hand there (kill -9: Kafka recovers an unclean log at the next start, only slower) and resume", on, noun, id)
}

// WaitRegistered waits until every broker of want is registered.
func WaitRegistered(ctx context.Context, zk ports.ZooKeeper, want []int32, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := zk.WaitChildren(wctx, kafkazk.BrokerIDsPath, func(kids []string) bool {
		for _, id := range want {
			if !slices.Contains(kids, fmt.Sprint(id)) {
				return false
			}
		}
		return true
	})
	if err != nil {
		reg, _ := Registered(ctx, zk)
		return fmt.Errorf("%w: not every broker registered: %s of %s after %s", ports.ErrCheckFailed, fmt.Sprint(reg), fmt.Sprint(want), timeout)
	}
	return nil
}

// ReadFile reads a file on node id's host exactly (base64 over SSH, so no
// byte is lost or added).
func ReadFile(ctx context.Context, h ports.Hosts, id int32, path string) ([]byte, error) {
	var b strings.Builder
	var errs []string
	err := h.Run(ctx, id, shell.Command("base64", "-w0", "--", path), func(l ports.Line) {
		if l.Stderr {
			errs = append(errs, l.Text)
			return
		}
		b.WriteString(l.Text)
	})
	if err != nil {
		return nil, fmt.Errorf("read %s on node %d: %w %s", path, id, err, strings.Join(errs, "; "))
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b.String()))
	if err != nil {
		return nil, fmt.Errorf("read %s on node %d: %w", path, id, err)
	}
	return raw, nil
}

// sizesFunc prints, for each path, its size in KiB, its modification time
// (seconds since the epoch) and the path, tab-separated.
const sizesFunc = `kremedy_sizes() {
  for p in "$@"; do
    s=$(du -sk -- "$p" 2>/dev/null | cut -f1); m=$(stat -c %Y -- "$p" 2>/dev/null)
    printf '%s\t%s\t%s\n' "${s:--1}" "${m:--1}" "$p"
  done
}
`

// Size is a directory's size and age on its host.
type Size struct {
	KiB      int64
	Modified time.Time // zero when unknown
}

// Sizes says how big and how old each path on node id's host is, in one
// command (du, stat). A path it could not measure is absent.
func Sizes(ctx context.Context, h ports.Hosts, id int32, paths []string) (map[string]Size, error) {
	out := map[string]Size{}
	if len(paths) == 0 {
		return out, nil
	}
	err := h.Run(ctx, id, shell.Script(sizesFunc+"kremedy_sizes "+shell.Command(paths...)), func(l ports.Line) {
		if l.Stderr {
			return
		}
		f := strings.SplitN(l.Text, "\t", 3)
		if len(f) != 3 {
			return
		}
		kib, err1 := strconv.ParseInt(f[0], 10, 64)
		mod, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || kib < 0 {
			return
		}
		s := Size{KiB: kib}
		if mod > 0 {
			s.Modified = time.Unix(mod, 0)
		}
		out[f[2]] = s
	})
	return out, err
}

// SizesText says, for each path of by (node → paths on its host), how big
// and how old it is ("12.0 MiB, last changed 3m ago"; "size and age
// unknown" when it could not be measured), one command per host, hosts in
// parallel. now is the clock ages are measured against.
func SizesText(ctx context.Context, h ports.Hosts, by map[int32][]string, now time.Time) map[string]string {
	ids := slices.Sorted(maps.Keys(by))
	got := par.Each(ids, func(id int32) map[string]Size {
		m, _ := Sizes(ctx, h, id, by[id])
		return m
	})
	out := map[string]string{}
	for i, id := range ids {
		for _, p := range by[id] {
			sz, ok := got[i][p]
			switch {
			case !ok:
				out[p] = "size and age unknown"
			case sz.Modified.IsZero():
				out[p] = KiB(sz.KiB) + ", age unknown"
			case now.Sub(sz.Modified) < time.Minute:
				out[p] = KiB(sz.KiB) + ", last changed less than a minute ago"
			default:
				out[p] = fmt.Sprintf("%s, last changed %s ago", KiB(sz.KiB), now.Sub(sz.Modified).Round(time.Minute))
			}
		}
	}
	return out
}

// Bytes is n bytes for people: "512 B", "20.0 KiB", "3.5 MiB", "1.2 GiB"
// (df's and a log dir's sizes; KiB below is for sizes du gives in KiB).
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// KiB is n KiB for people: "20 KiB", "3.5 MiB", "1.2 GiB".
func KiB(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d KiB", n)
}
