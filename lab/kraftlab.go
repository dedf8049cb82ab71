package lab

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kremedy/kremedy/internal/kafkaver"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/ports"
)

// A KRaft lab (`lab up --kraft`) is a KRaft-only cluster: no ZooKeeper
// process at all; KRaftControllers controllers (node.id 3001…, on
// 127.<Net>.3.K:9093, each with its own sshd like the migration lab's) form
// the metadata quorum with static controller.quorum.voters; Brokers
// brokers (node.id N on 127.<Net>.1.N:9092) run process.roles=broker.
// Every node is formatted once by Kafka's own storage tool with the lab's
// one random cluster id; `lab up` returns when the quorum has a leader and
// every broker is registered and unfenced (DescribeQuorum, DescribeCluster).

// kraftBrokerProps is broker n's server.properties in a KRaft lab (and ""
// in any other lab). A secured lab's brokers listen on SASL_SSL only
// (brokerSecurity) and reach the controllers on SASL_SSL with PLAIN.
func (l *Lab) kraftBrokerProps(n int) (string, error) {
	c := l.State.Config
	if !c.KRaft {
		return "", nil
	}
	text := l.plainKRaftBrokerProps(n)
	if !c.Secure {
		return text, nil
	}
	sec, err := l.brokerSecurity(n)
	if err != nil {
		return "", err
	}
	ctrl := "" // a combined node's controller listener beside its SASL_SSL one, on the same keystore
	if c.Combined {
		ctrl = fmt.Sprintf(",CONTROLLER://%s:%d", c.BrokerHost(n), ControllerPort)
	}
	own := fmt.Sprintf("listeners=SASL_SSL://%s:%d", c.BrokerHost(n), KafkaPort)
	return strings.NewReplacer(
		fmt.Sprintf("listeners=PLAINTEXT://%s:%d%s\n", c.BrokerHost(n), KafkaPort, ctrl), strings.Replace(sec, own+"\n", own+ctrl+"\n", 1),
		"inter.broker.listener.name=PLAINTEXT\n", "", // security.inter.broker.protocol=SASL_SSL names it
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT", "listener.security.protocol.map=CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL",
	).Replace(text), nil
}

// plainKRaftBrokerProps is broker n's server.properties in a KRaft lab
// without security.
func (l *Lab) plainKRaftBrokerProps(n int) string {
	c := l.State.Config
	roles, listeners := "broker", fmt.Sprintf("PLAINTEXT://%s:%d", c.BrokerHost(n), KafkaPort)
	if c.Combined {
		// A combined node: broker and controller in one process (the
		// metadata log in its first log dir).
		roles, listeners = "broker,controller", listeners+fmt.Sprintf(",CONTROLLER://%s:%d", c.BrokerHost(n), ControllerPort)
	}
	return fmt.Sprintf(`# Kafka broker %d of the kremedy lab (KRaft mode: no ZooKeeper)
process.roles=%s
node.id=%d
%s
controller.listener.names=CONTROLLER
listeners=%s
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%s
`, n, roles, n, c.quorumProp(), listeners, strings.Join(l.LogDirs(n), ",")) + l.brokerDefaults() + c.rackProp(n) + l.tieredProps()
}

// kraftControllerProps is controller k's controller.properties in a KRaft
// lab.
func (l *Lab) kraftControllerProps(k int) string {
	c := l.State.Config
	return fmt.Sprintf(`# KRaft controller %d of the kremedy lab (a KRaft-only cluster)
process.roles=controller
node.id=%d
%s
controller.listener.names=CONTROLLER
listeners=CONTROLLER://%s:%d
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%s
num.network.threads=2
num.io.threads=2
background.threads=2
`, k, ControllerID(k), c.quorumProp(), c.ControllerHost(k), ControllerPort, l.controllerMetadataDir(k)) + l.tieredControllerProps()
}

// newClusterID is a random cluster id as `kafka-storage random-uuid`
// prints it (Uuid.randomUuid: 16 random bytes, URL-safe base64 without
// padding, never starting with '-').
func newClusterID() (string, error) {
	for {
		b := make([]byte, 16)
		if _, err := io.ReadFull(rand.Reader, b); err != nil {
			return "", err
		}
		if id := base64.RawURLEncoding.EncodeToString(b); id[0] != '-' {
			return id, nil
		}
	}
}

// javaVersion is the feature release of the java binary (17 for
// "17.0.15"), 0 when it cannot tell.
func javaVersion(java string) int {
	b, _ := exec.Command(java, "-XshowSettings:properties", "-version").CombinedOutput()
	m := regexp.MustCompile(`java\.specification\.version = (\d+)`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// checkJava refuses a Java the release's brokers do not run on: Kafka 4.x
// brokers and controllers need Java 17 (KIP-1013).
func checkJava(java string, v kafkaver.Version) error {
	if !v.AtLeast(4, 0) {
		return nil
	}
	if got := javaVersion(java); got != 0 && got < 17 {
		return fmt.Errorf("%w: %s is Java %d; Kafka %s brokers and controllers need Java 17 or later (Debian: apt-get install openjdk-17-jre-headless, or set JAVA_HOME)", ErrMissingPart, java, got, v)
	}
	return nil
}

// controllerAddrs are the controllers' listeners (host:port).
func (c Config) controllerAddrs() []string {
	var out []string
	if c.Combined {
		for n := 1; n <= c.Brokers; n++ {
			out = append(out, fmt.Sprintf("%s:%d", c.BrokerHost(n), ControllerPort))
		}
	}
	for k := 1; k <= c.KRaftControllers; k++ {
		out = append(out, fmt.Sprintf("%s:%d", c.ControllerHost(k), ControllerPort))
	}
	return out
}

// formatKRaft formats every node of a KRaft lab that is not formatted yet
// with the lab's cluster id, in parallel.
func (l *Lab) formatKRaft(ctx context.Context, out io.Writer) error {
	c := l.State.Config
	type node struct {
		label, props, dir string
		dirs              []string
		extra             []string
	}
	var nodes []node
	var scram []string // a secured lab's SCRAM users, for every voter's format
	if c.Secure {
		var err error
		if scram, err = l.formatSCRAM(); err != nil {
			return err
		}
	}
	for k := 1; k <= c.KRaftControllers; k++ {
		var extra []string
		if c.DynamicQuorum() {
			extra = []string{"--initial-controllers", l.State.initialControllers()}
		}
		extra = append(extra, scram...)
		nodes = append(nodes, node{fmt.Sprintf("kraft controller %d  node.id %d", k, ControllerID(k)), l.controllerProps(k), l.ControllerDir(k), []string{l.controllerMetadataDir(k)}, extra})
	}
	for n := 1; n <= c.Brokers; n++ {
		var extra []string
		if c.Combined {
			// A combined node is a voter: the SCRAM users go into the
			// bootstrap metadata of every one of them.
			extra = scram
		}
		nodes = append(nodes, node{fmt.Sprintf("broker    %d  node.id %d", n, n), filepath.Join(l.BrokerDir(n), "server.properties"), l.BrokerDir(n), l.LogDirs(n), extra})
	}
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, nd := range nodes {
		formatted := true
		for _, d := range nd.dirs {
			if _, err := os.Stat(filepath.Join(d, "meta.properties")); err != nil {
				formatted = false
			}
		}
		if formatted {
			continue
		}
		wg.Add(1)
		go func(i int, nd node) {
			defer wg.Done()
			if err := l.storageFormat(ctx, l.State.ClusterID, nd.props, nd.dir, nd.extra...); err != nil {
				errs[i] = fmt.Errorf("kafka-storage format of %s: %w", nd.label, err)
				return
			}
			// The tool logged into the node's logs dir as root: the
			// node's own log4j must still write there.
			if err := l.giveToService(append(nd.dirs, filepath.Join(nd.dir, "logs"))...); err != nil {
				errs[i] = fmt.Errorf("after kafka-storage format of %s: %w", nd.label, err)
				return
			}
			fmt.Fprintf(out, "  %s formatted (kafka-storage format, cluster id %s)\n", nd.label, l.State.ClusterID)
		}(i, nd)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// upKRaft starts a KRaft lab's controllers and brokers that do not run and
// waits until it is healthy. The sshd hosts run already.
func (l *Lab) upKRaft(ctx context.Context, start time.Time, out io.Writer) error {
	c := l.State.Config
	if c.Kerberos {
		// The brokers log in to the KDC as they start.
		if err := l.startKDC(ctx, out); err != nil {
			return err
		}
	}
	if err := l.formatKRaft(ctx, out); err != nil {
		return fmt.Errorf("%w. Nothing was started; the lab's files are in %s", err, l.Dir)
	}
	type job struct {
		label, script, addr string
		pid                 func() int
	}
	var jobs []job
	for k := 1; k <= c.KRaftControllers; k++ {
		k := k
		jobs = append(jobs, job{fmt.Sprintf("kraft controller %d", k), l.controllerScript(k, "start"),
			fmt.Sprintf("%s:%d", c.ControllerHost(k), ControllerPort), func() int { return l.controllerPID(k) }})
	}
	for n := 1; n <= c.Brokers; n++ {
		n := n
		jobs = append(jobs, job{fmt.Sprintf("broker    %d", n), l.StartScript(n),
			fmt.Sprintf("%s:%d", c.BrokerHost(n), KafkaPort), func() int { return l.brokerPID(n) }})
	}
	// Controllers and brokers start together: a broker waits for the
	// quorum by itself, as it does in production when both restart.
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		if j.pid() > 0 {
			continue
		}
		wg.Add(1)
		go func(i int, j job) {
			defer wg.Done()
			b, err := exec.CommandContext(ctx, j.script).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("%s did not start: %v\n%s", strings.TrimSpace(j.label), err, indent(string(b)))
				return
			}
			fmt.Fprintf(out, "  %s  %s  started (pid %d)\n", j.label, j.addr, j.pid())
		}(i, j)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w. The lab is half started: run `kremedy lab up --dir %s` again after fixing the cause, or `kremedy lab down --dir %s`", err, l.Dir, l.Dir)
	}
	q, err := l.waitKRaft(ctx, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "lab up in %.1fs: KRaft quorum of %d voters, leader %d (epoch %d); %d brokers registered and unfenced; no ZooKeeper\n",
		time.Since(start).Seconds(), len(q.Voters), q.Leader, q.Epoch, c.Brokers)
	fmt.Fprintf(out, "inventory: %s\n", l.InventoryPath())
	return nil
}

// Quorum asks the lab's controllers for the metadata quorum
// (DescribeQuorum on the controller listener).
func (l *Lab) Quorum(ctx context.Context) (ports.Quorum, error) {
	kc, err := l.kafkaClient()
	if err != nil {
		return ports.Quorum{}, err
	}
	defer kc.Close()
	return kc.Quorum(ctx, l.State.Config.controllerAddrs())
}

// quorumHealthy reports whether q has a leader among all the lab's voters
// and every voter is caught up with it.
func (l *Lab) quorumHealthy(q ports.Quorum) bool {
	if q.Leader < 0 || len(q.Voters) != l.State.Config.voters() {
		return false
	}
	now := time.Now()
	for _, v := range q.Voters {
		if !voterCaughtUp(q, v.ID, now, 5*time.Second) {
			return false
		}
	}
	return slices.ContainsFunc(q.Voters, func(v ports.Voter) bool { return v.ID == q.Leader })
}

// BrokerStates are the brokers a KRaft cluster has registered, as
// DescribeCluster reports them: unfenced (serving) and, from 4.0
// (DescribeCluster v2, KIP-1073), fenced ones too.
type BrokerStates struct {
	Unfenced, Fenced []int32
	// SeesFenced: the answer lists fenced brokers (DescribeCluster v2);
	// before 4.0 a fenced broker is simply absent.
	SeesFenced bool
}

// kraftBrokers asks the cluster (DescribeCluster, through any broker) which
// brokers are registered and which are fenced.
func kraftBrokers(ctx context.Context, kc *kafka.Client) (BrokerStates, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = true
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, kc.Kgo())
	if err != nil {
		return BrokerStates{}, fmt.Errorf("describe cluster: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return BrokerStates{}, fmt.Errorf("describe cluster: %w", err)
	}
	st := BrokerStates{SeesFenced: resp.Version >= 2}
	for _, b := range resp.Brokers {
		if b.IsFenced {
			st.Fenced = append(st.Fenced, b.NodeID)
		} else {
			st.Unfenced = append(st.Unfenced, b.NodeID)
		}
	}
	sort.Slice(st.Unfenced, func(i, j int) bool { return st.Unfenced[i] < st.Unfenced[j] })
	sort.Slice(st.Fenced, func(i, j int) bool { return st.Fenced[i] < st.Fenced[j] })
	return st, nil
}

// BrokerStates asks the lab's cluster which brokers are registered and
// unfenced.
func (l *Lab) BrokerStates(ctx context.Context) (BrokerStates, error) {
	kc, err := l.kafkaClient()
	if err != nil {
		return BrokerStates{}, err
	}
	defer kc.Close()
	return kraftBrokers(ctx, kc)
}

func (c Config) brokerIDs() []int32 {
	var ids []int32
	for n := 1; n <= c.Brokers; n++ {
		ids = append(ids, int32(n))
	}
	return ids
}

// waitKRaft waits until the quorum has a leader among all voters and every
// broker is registered, unfenced, listening and sees every other broker; a
// secured lab's ACLs are written (ensureACLs) before that last check, which
// the operator's client makes.
func (l *Lab) waitKRaft(ctx context.Context, out io.Writer) (ports.Quorum, error) {
	c := l.State.Config
	kc, err := l.kafkaClient()
	if err != nil {
		return ports.Quorum{}, err
	}
	defer kc.Close()
	var q ports.Quorum
	var qerr error
	err = waitFor(ctx, 200*time.Millisecond, func() bool {
		q, qerr = kc.Quorum(ctx, c.controllerAddrs())
		return qerr == nil && l.quorumHealthy(q)
	})
	if err != nil {
		return q, l.kraftNotHealthy(fmt.Sprintf("the KRaft quorum has no leader among its %d voters (last answer: leader %d, voters %d, %v)", c.voters(), q.Leader, len(q.Voters), qerr), nil)
	}
	want := c.brokerIDs()
	for n := 1; err == nil && n <= c.Brokers; n++ {
		err = waitFor(ctx, 20*time.Millisecond, func() bool { return listening(c.BrokerHost(n), KafkaPort) })
	}
	var st BrokerStates
	if err == nil {
		err = waitFor(ctx, 200*time.Millisecond, func() bool {
			st, qerr = kraftBrokers(ctx, kc)
			return qerr == nil && slices.Equal(st.Unfenced, want)
		})
	}
	if err == nil && c.Secure {
		// The operator's client (waitMetadata's) needs its ACLs first.
		err = l.ensureACLs(ctx, out)
	}
	if err == nil {
		err = l.waitMetadata(ctx)
	}
	if err != nil {
		return q, l.kraftNotHealthy(fmt.Sprintf("registered and unfenced brokers %v of %v, fenced %v (%v)", st.Unfenced, want, st.Fenced, errors.Join(err, qerr)), st.Unfenced)
	}
	return q, nil
}

// kraftNotHealthy is ErrNotHealthy with the last lines of every node that
// does not run or does not serve.
func (l *Lab) kraftNotHealthy(what string, unfenced []int32) error {
	c := l.State.Config
	var why []string
	for k := 1; k <= c.KRaftControllers; k++ {
		log := filepath.Join(l.ControllerDir(k), "logs", "server.log")
		if l.controllerPID(k) == 0 || unfenced == nil {
			why = append(why, fmt.Sprintf("kraft controller %d (process running: %v); last lines of %s:\n%s", k, l.controllerPID(k) > 0, log, tail(log, 10)))
		}
	}
	for n := 1; n <= c.Brokers; n++ {
		if !slices.Contains(unfenced, int32(n)) {
			log := filepath.Join(l.BrokerDir(n), "logs", "server.log")
			why = append(why, fmt.Sprintf("broker %d is not registered and unfenced (process running: %v); last lines of %s:\n%s", n, l.brokerPID(n) > 0, log, tail(log, 15)))
		}
	}
	return fmt.Errorf("%w: %s\n%s\nThe lab is half started; `kremedy lab up --dir %s` retries, `kremedy lab down --dir %s` stops it",
		ErrNotHealthy, what, strings.Join(why, "\n"), l.Dir, l.Dir)
}

// ControllerNumber maps a `lab controller` argument to controller k:
// its node.id (3001…) or its number (1…).
func (l *Lab) ControllerNumber(arg string) (int, error) {
	c := l.State.Config
	n, err := strconv.Atoi(arg)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: controller %q is not a number: name its node.id (%d…%d) or its number (1…%d)", ErrWrongLab, arg, ControllerID(1), ControllerID(c.KRaftControllers), c.KRaftControllers)
	case c.KRaftControllers == 0:
		return 0, fmt.Errorf("%w: this lab has no KRaft controllers (start one with `kremedy lab up --kraft`, or `--kraft-controllers 3` for the migration)", ErrWrongLab)
	case n >= 1 && n <= c.KRaftControllers:
		return n, nil
	case n > controllerIDBase && n <= controllerIDBase+c.KRaftControllers:
		return n - controllerIDBase, nil
	}
	return 0, fmt.Errorf("%w: the lab has no controller %d: its controllers are node.id %d…%d (numbers 1…%d)", ErrWrongLab, n, ControllerID(1), ControllerID(c.KRaftControllers), c.KRaftControllers)
}

// ControllerCommand runs KRaft controller k's stop or start command from
// the lab's inventory over SSH — as BrokerCommand does for a broker — then
// waits until the controller agrees: after a stop its process is gone and
// its listener closed; after a start it listens and the quorum's leader
// sees it caught up (DescribeQuorum). It reports the quorum it then sees.
func (l *Lab) ControllerCommand(ctx context.Context, k int, action string, out func(string)) error {
	c := l.State.Config
	id := ControllerID(k)
	if err := l.runNodeCommand(ctx, id, true, action, fmt.Sprintf("kraft controller %d", id), out); err != nil {
		return err
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	host := c.ControllerHost(k)
	var q ports.Quorum
	var qerr error
	var err error
	if action == "stop" {
		err = waitFor(wctx, 50*time.Millisecond, func() bool { return l.controllerPID(k) == 0 && !listening(host, ControllerPort) })
	} else {
		err = waitFor(wctx, 200*time.Millisecond, func() bool {
			if !listening(host, ControllerPort) {
				return false
			}
			q, qerr = l.Quorum(wctx)
			return qerr == nil && q.Leader >= 0 && voterCaughtUp(q, id, time.Now(), 5*time.Second)
		})
	}
	if err != nil {
		return fmt.Errorf("kraft controller %d: %s command succeeded but the controller %s after 90s (%v)", id, action,
			map[string]string{"stop": "still runs or listens", "start": "is not a caught-up voter"}[action], errors.Join(err, qerr))
	}
	if action == "stop" && l.controllersRunning() > c.KRaftControllers/2 {
		// The survivors elect a leader if it was this one (when they are
		// still a majority: otherwise none comes, and nothing waits).
		_ = waitFor(wctx, 200*time.Millisecond, func() bool {
			q, qerr = l.Quorum(wctx)
			return qerr == nil && q.Leader >= 0 && q.Leader != id
		})
	}
	out(fmt.Sprintf("kraft controller %d %s %.1fs after the %s command began; quorum: %s", id,
		map[string]string{"stop": "stopped", "start": "is a caught-up voter"}[action], time.Since(start).Seconds(), action, quorumLine(q, qerr, time.Now())))
	return nil
}

// controllersRunning counts the controllers whose JVM runs.
func (l *Lab) controllersRunning() int {
	n := 0
	for k := 1; k <= l.State.Config.KRaftControllers; k++ {
		if l.controllerPID(k) > 0 {
			n++
		}
	}
	return n
}

// voterCaughtUp reports whether voter id fetched up to the leader's end
// within the last d (the leader's LastCaughtUpTimestamp; the leader
// itself always is).
func voterCaughtUp(q ports.Quorum, id int32, now time.Time, d time.Duration) bool {
	if q.Leader == id {
		return true
	}
	for _, v := range q.Voters {
		if v.ID == id {
			return v.LastCaughtUpMs > 0 && now.Sub(time.UnixMilli(v.LastCaughtUpMs)) < d
		}
	}
	return false
}

// quorumLine is a quorum in one line: leader, epoch, each voter's lag.
func quorumLine(q ports.Quorum, err error, now time.Time) string {
	if err != nil {
		return "no answer (" + err.Error() + ")"
	}
	if q.Leader < 0 {
		return fmt.Sprintf("NO LEADER (epoch %d)", q.Epoch)
	}
	var vs []string
	for _, v := range q.Voters {
		s := fmt.Sprintf("%d", v.ID)
		switch {
		case v.ID == q.Leader:
			s += " leader"
		case v.LastCaughtUpMs > 0:
			s += fmt.Sprintf(" caught up %.1fs ago", now.Sub(time.UnixMilli(v.LastCaughtUpMs)).Seconds())
		default:
			s += " never caught up"
		}
		vs = append(vs, s)
	}
	return fmt.Sprintf("leader %d, epoch %d, high watermark %d; voters: %s", q.Leader, q.Epoch, q.HighWatermark, strings.Join(vs, ", "))
}

// kraftNote is a KRaft lab's release and what it does with the logs a
// restarted broker finds stale.
func kraftNote(s State) string {
	what := "a restarted broker renames a recreated topic's old logs <topic>-<p>.<uuid>-stray (KAFKA-14616)"
	if s.StraysMissingMetadata() {
		what += " and also a log without partition.metadata (KAFKA-16814)"
	} else {
		what += "; a log without partition.metadata stops the broker (fixed in 3.7.1, KAFKA-16814)"
	}
	return fmt.Sprintf(", Kafka %s in KRaft mode (no ZooKeeper; %s)", s.Kafka, what)
}
