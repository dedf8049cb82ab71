package live

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// Result is one part of the cluster a check reached, or did not.
type Result struct {
	Part   string `json:"part"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

func res(part string, err error, okDetail string) Result {
	if err != nil {
		return Result{Part: part, Detail: err.Error()}
	}
	return Result{Part: part, OK: true, Detail: okDetail}
}

// Check reaches every part an inventory names, with the inventory's own
// credentials: ZooKeeper (the cluster id, every broker registered and
// none unknown, the right to delete the topics' znodes), every broker over
// Kafka, every broker host over SSH (host key, sudo when the inventory
// says become: sudo, its log dirs there and writable by the user commands
// run as) and every client host. become says, per broker, whether its
// commands go through sudo (for the words only).
func Check(ctx context.Context, c ports.Cluster, become map[int32]bool) []Result {
	if c.ZK == nil {
		return checkKRaft(ctx, c, become)
	}
	var out []Result
	zk, t := c.ZK, c.Target
	id, _, err := zk.Get(ctx, kafkazk.ClusterIDPath)
	out = append(out, res("zookeeper "+t.ZKConnect, err, "cluster id "+string(clusterID(id))))

	regs, err := Registrations(ctx, zk)
	registered := map[int32]bool{}
	for _, r := range regs {
		registered[r.ID] = true
	}
	var missing, unknown []string
	want := map[int32]bool{}
	for _, h := range t.Hosts {
		want[h.ID] = true
		if !registered[h.ID] {
			missing = append(missing, fmt.Sprint(h.ID))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(registered)) {
		if !want[id] {
			unknown = append(unknown, fmt.Sprint(id))
		}
	}
	kraftCtrl := kraftController(ctx, zk)
	switch {
	case len(regs) == 0 && kraftCtrl >= 0:
		// A migration past its brokers' roll to KRaft: they register with
		// the controllers, not in ZooKeeper.
		out = append(out, kraftRegistered(ctx, c, kraftCtrl))
	case err != nil:
		out = append(out, res("brokers registered", err, ""))
	case len(missing)+len(unknown) > 0:
		out = append(out, Result{Part: "brokers registered", Detail: fmt.Sprintf("in the inventory, not registered (down?): [%s]; registered, not in the inventory: [%s]", strings.Join(missing, " "), strings.Join(unknown, " "))})
	default:
		out = append(out, Result{Part: "brokers registered", OK: true, Detail: fmt.Sprintf("every inventory broker %v, no other", brokers.HostIDs(t))})
	}
	denied, first, err := brokers.MayDelete(ctx, zk, []string{kafkazk.TopicsPath, kafkazk.ConfigTopicsPath})
	if err == nil && len(denied) > 0 {
		err = fmt.Errorf("may not delete under %s (%v): a cleanup would be refused; with SASL-ACL'd znodes give zookeeper.auth a superDigest identity", strings.Join(denied, ", "), first)
	}
	out = append(out, res("zookeeper rights", err, "may delete topics' znodes (probed, nothing changed)"))

	out = append(out, reachBrokers(ctx, c, become)...)
	return append(out, reachControllers(ctx, c)...)
}

// kraftController is the KRaft controller that holds /controller in a
// migration, -1 when a ZooKeeper broker (or nobody) does.
func kraftController(ctx context.Context, zk ports.ZooKeeper) int32 {
	b, _, err := zk.Get(ctx, kafkazk.ControllerPath)
	if err != nil {
		return -1
	}
	var z kafkazk.ControllerZNode
	if json.Unmarshal(b, &z) != nil || !z.KRaft() {
		return -1
	}
	return z.BrokerID
}

// kraftRegistered checks, over Kafka, that every inventory broker is
// registered with the KRaft controllers and unfenced (a migration whose
// brokers are KRaft brokers already: dual-write or finalized).
func kraftRegistered(ctx context.Context, c ports.Cluster, ctrl int32) Result {
	part := "brokers registered"
	cv, err := c.Kafka.DescribeCluster(ctx)
	if err != nil {
		return res(part, fmt.Errorf("none in ZooKeeper (KRaft controller %d holds /controller: the brokers are KRaft brokers) and the cluster does not answer DescribeCluster: %w", ctrl, err), "")
	}
	listed := map[int32]bool{}
	for _, b := range cv.Brokers {
		listed[b.ID] = !b.Fenced
	}
	var missing []string
	for _, h := range c.Target.Hosts {
		if !listed[h.ID] {
			missing = append(missing, fmt.Sprint(h.ID))
		}
	}
	if len(missing) > 0 {
		return Result{Part: part, Detail: fmt.Sprintf("brokers [%s] are neither in ZooKeeper nor registered and unfenced with the KRaft controllers (KRaft controller %d holds /controller): down?", strings.Join(missing, " "), ctrl)}
	}
	return Result{Part: part, OK: true, Detail: fmt.Sprintf("every inventory broker %v, with the KRaft controllers (a migration past the brokers' roll to KRaft: KRaft controller %d holds /controller, none registers in ZooKeeper)", brokers.HostIDs(c.Target), ctrl)}
}

// checkKRaft is Check for a KRaft cluster: the cluster over Kafka
// (DescribeCluster: its id, every inventory broker registered with the
// controllers and unfenced, none unknown), the metadata quorum (a leader,
// every inventory controller a voter), then the brokers and controllers as
// in ZooKeeper mode.
func checkKRaft(ctx context.Context, c ports.Cluster, become map[int32]bool) []Result {
	var out []Result
	t := c.Target
	cv, err := c.Kafka.DescribeCluster(ctx)
	out = append(out, res("kafka "+strings.Join(t.Bootstrap, ","), err, "cluster id "+cv.ClusterID))
	if err == nil {
		listed := map[int32]ports.BrokerNode{}
		for _, b := range cv.Brokers {
			listed[b.ID] = b
		}
		var missing, fenced, unknown []string
		for _, h := range t.Hosts {
			switch b, ok := listed[h.ID]; {
			case !ok:
				missing = append(missing, fmt.Sprint(h.ID))
			case b.Fenced:
				fenced = append(fenced, fmt.Sprint(h.ID))
			}
		}
		for _, id := range slices.Sorted(maps.Keys(listed)) {
			if _, ok := t.Host(id); !ok {
				unknown = append(unknown, fmt.Sprint(id))
			}
		}
		if len(missing)+len(fenced)+len(unknown) > 0 {
			out = append(out, Result{Part: "brokers registered", Detail: fmt.Sprintf("in the inventory, not registered with the controllers (down?): [%s]; fenced: [%s]; registered, not in the inventory: [%s]", strings.Join(missing, " "), strings.Join(fenced, " "), strings.Join(unknown, " "))})
		} else {
			out = append(out, Result{Part: "brokers registered", OK: true, Detail: fmt.Sprintf("every inventory broker %v, unfenced, no other", brokers.HostIDs(t))})
		}
	}
	var addrs []string
	for _, h := range t.Controllers {
		addrs = append(addrs, h.Addr)
	}
	q, err := c.Kafka.Quorum(ctx, addrs)
	if err == nil {
		var voters, notVoter []int32
		for _, v := range q.Voters {
			voters = append(voters, v.ID)
		}
		for _, h := range t.Controllers {
			if !slices.Contains(voters, h.ID) {
				notVoter = append(notVoter, h.ID)
			}
		}
		switch {
		case q.Leader < 0:
			err = fmt.Errorf("no leader (voters %v)", voters)
		case len(notVoter) > 0:
			err = fmt.Errorf("controllers %v of the inventory are not voters (voters %v)", notVoter, voters)
		}
	}
	out = append(out, res("metadata quorum "+strings.Join(addrs, ","), controllerSecurity(err), fmt.Sprintf("leader %d, epoch %d, voters %s", q.Leader, q.Epoch, voterList(q.Voters))))
	out = append(out, reachBrokers(ctx, c, become)...)
	return append(out, reachControllers(ctx, c)...)
}

// controllerSecurity adds the way on to a quorum ask that the
// controllers' listener refused on its security: their own client
// properties (a secured cluster's controllers often take PLAIN, mTLS or
// Kerberos where the brokers take SCRAM, which lives in the metadata log).
func controllerSecurity(err error) error {
	if !RefusedCredentials(err) {
		return err
	}
	return fmt.Errorf("%w\n→ the controllers' listener refused kremedy's credentials: give it a client properties file of its own, kafka.controller_client_properties (security.protocol, sasl.mechanism and a login that listener takes: listener.name.<controller listener>.*.sasl.jaas.config on the controllers, super.users or a DESCRIBE ACL on the cluster for DescribeQuorum; the truststore, and a keystore when it asks for a client certificate); docs/kraft.md", err)
}

// RefusedCredentials reports whether a listener refused err's request on
// its security: a SASL mechanism or login it does not take, no
// authorization, or a TLS handshake that failed (a certificate it does
// not trust, or none where it asks for one).
func RefusedCredentials(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range []error{kerr.UnsupportedSaslMechanism, kerr.SaslAuthenticationFailed, kerr.IllegalSaslState, kerr.ClusterAuthorizationFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	var cert x509.UnknownAuthorityError
	var host x509.HostnameError
	var rec tls.RecordHeaderError
	var alert tls.AlertError
	return errors.As(err, &cert) || errors.As(err, &host) || errors.As(err, &rec) || errors.As(err, &alert) ||
		strings.Contains(err.Error(), "tls: ")
}

func voterList(vs []ports.Voter) string {
	ids := make([]int32, len(vs))
	for i, v := range vs {
		ids[i] = v.ID
	}
	return fmt.Sprint(ids)
}

// reachControllers reaches every KRaft controller of the inventory over
// SSH (host key) and its controller listener over TCP; in ZooKeeper mode
// (controllers provisioned for the migration) one not started yet is
// expected.
func reachControllers(ctx context.Context, c ports.Cluster) []Result {
	var out []Result
	hs := c.Target.Controllers
	ids := make([]int32, len(hs))
	for i, h := range hs {
		ids[i] = h.ID
	}
	checks := par.Each(ids, func(id int32) error { return c.Hosts.Check(ctx, id) })
	var up []string
	for i, h := range hs {
		out = append(out, res(fmt.Sprintf("controller %d ssh", h.ID), checks[i], "host key verified"))
		var err error
		ok := h.Addr + " accepts connections"
		if h.Addr != "" && !c.Kafka.Listening(ctx, h.Addr) {
			if c.Target.KRaft {
				err = fmt.Errorf("nothing accepts connections at %s (stopped, or not reachable from here)", h.Addr)
			} else {
				// Provisioned for the migration: zk-to-kraft starts it.
				ok = h.Addr + " not listening: not started yet (zk-to-kraft's start-controllers starts it)"
			}
		} else if h.Addr != "" {
			up = append(up, h.Addr)
		}
		out = append(out, res(fmt.Sprintf("controller %d listener", h.ID), err, ok))
	}
	// A migration under way: the controllers run beside ZooKeeper. kremedy
	// asks them for the quorum with the credentials the inventory gives
	// for their listener (checkKRaft does so for a KRaft cluster).
	if !c.Target.KRaft && len(up) > 0 {
		q, err := c.Kafka.Quorum(ctx, up)
		out = append(out, res("metadata quorum "+strings.Join(up, ","), controllerSecurity(err), fmt.Sprintf("leader %d, epoch %d, voters %s", q.Leader, q.Epoch, voterList(q.Voters))))
	}
	return out
}

// reachBrokers asks every broker over Kafka and every host over SSH.
func reachBrokers(ctx context.Context, c ports.Cluster, become map[int32]bool) []Result {
	var out []Result
	t := c.Target
	ids := brokers.HostIDs(t)
	for _, r := range c.Kafka.Releases(ctx, ids) {
		var err error
		if r.Err != "" {
			err = fmt.Errorf("%s", r.Err)
		}
		out = append(out, res(fmt.Sprintf("broker %d kafka", r.Broker), err, "answers: Kafka "+r.Guess+ibp(r.IBP)))
	}

	dirs := map[int32][]string{}
	for _, h := range t.Hosts {
		dirs[h.ID] = h.LogDirs
		if len(dirs[h.ID]) == 0 {
			dirs[h.ID], _ = c.Kafka.LogDirs(ctx, h.ID)
		}
	}
	checks := par.Each(ids, func(id int32) error { return c.Hosts.Check(ctx, id) })
	l := brokers.List(ctx, c.Hosts, t, dirs)
	for i, id := range ids {
		how := "host key verified, commands run as the login user"
		if become[id] {
			how = "host key verified, sudo -n works"
		}
		if checks[i] != nil {
			out = append(out, res(fmt.Sprintf("broker %d ssh", id), checks[i], ""))
			continue
		}
		out = append(out, res(fmt.Sprintf("broker %d ssh", id), nil, how))
		err := l.Errs[id]
		if err == nil && len(l.Unwritable[id]) > 0 {
			var bad []string
			for _, d := range slices.Sorted(maps.Keys(l.Unwritable[id])) {
				bad = append(bad, d+" ("+l.Unwritable[id][d]+")")
			}
			err = fmt.Errorf("not writable by the user commands run as: %s; set become: sudo", strings.Join(bad, ", "))
		}
		if err == nil && len(dirs[id]) == 0 {
			err = fmt.Errorf("no log dirs: neither the inventory nor the broker names them")
		}
		out = append(out, res(fmt.Sprintf("broker %d log dirs", id), err, strings.Join(dirs[id], ", ")+" listed and writable"))
	}
	for _, cl := range t.Clients {
		err := c.Hosts.RunClient(ctx, cl, "true", nil)
		out = append(out, res("client "+cl.Name+" ssh", err, "host key verified"))
	}
	return out
}

func clusterID(b []byte) []byte {
	if id := kafkazk.ClusterID(b); id != "" {
		return []byte(id)
	}
	return b
}

func ibp(v string) string {
	if v == "" {
		return ""
	}
	return ", inter.broker.protocol.version " + v
}
