package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/zookeeper"

	"github.com/kremedy/kremedy/internal/kafkaver"
)

// UpTimeout bounds `lab up` from the first start to a registered cluster.
var UpTimeout = 150 * time.Second

// Up creates or resumes the lab in dir and returns once every broker is
// registered and a controller is elected. explicit reports which settings
// the caller set on purpose; for an existing lab they must match what it was
// made with. Up is idempotent: parts already running are left alone.
func Up(ctx context.Context, dir string, want Config, explicit func(string) bool, out io.Writer) (*Lab, error) {
	out = &lockedWriter{w: out} // stopped brokers start in parallel, each saying so
	start := time.Now()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	l, err := openOrCreate(abs, want, explicit, out)
	if err != nil {
		return nil, err
	}
	if err := l.refuseWiped(); err != nil {
		return nil, err
	}
	sshd, err := l.prepare(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.fetchTiered(ctx, out); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, UpTimeout)
	defer cancel()

	// ZooKeeper first, sshd alongside; brokers once the ensemble has a quorum.
	if err := l.startZooKeepers(out); err != nil {
		return nil, err
	}
	if err := l.startSSHDs(sshd, out); err != nil {
		return nil, err
	}
	if l.State.Config.KRaft {
		if err := l.upKRaft(ctx, start, out); err != nil {
			return nil, err
		}
		return l, nil
	}
	if err := l.upZooKeeperMode(ctx, start, out); err != nil {
		return nil, err
	}
	return l, nil
}

// openOrCreate opens the lab in abs, checking that want's explicit
// settings match it and taking its new heaps, or creates it when abs holds
// no lab yet; it says on out which it did.
func openOrCreate(abs string, want Config, explicit func(string) bool, out io.Writer) (*Lab, error) {
	l, err := Open(abs)
	switch {
	case err == nil:
		if err := l.sameConfig(want, explicit); err != nil {
			return nil, err
		}
		// The heaps may change: they take effect at each part's next start.
		if explicit != nil && explicit("broker-heap") {
			l.State.Config.BrokerHeap = want.BrokerHeap
		}
		if explicit != nil && explicit("zk-heap") {
			l.State.Config.ZKHeap = want.ZKHeap
		}
		if _, err := CheckKafkaHome(l.State.Config.KafkaHome); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "lab %s exists; starting whatever is not running\n", abs)
	case errors.Is(err, ErrNoLab):
		if l, err = create(abs, want); err != nil {
			return nil, err
		}
		if l.State.KRaft() {
			fmt.Fprintf(out, "new KRaft lab in %s: %d controllers, %d brokers%s\n", abs, l.State.Config.KRaftControllers, l.State.Config.Brokers, ibpNote(l.State))
		} else {
			fmt.Fprintf(out, "new lab in %s: %d ZooKeeper nodes, %d brokers%s\n", abs, l.State.Config.ZooKeepers, l.State.Config.Brokers, ibpNote(l.State))
		}
	default:
		return nil, err
	}
	return l, nil
}

// prepare finds java (again, if the recorded one is gone) and sshd, checks
// the lab's ports and writes its files. It returns sshd's path.
func (l *Lab) prepare(ctx context.Context) (string, error) {
	if _, err := os.Stat(l.State.Java); err != nil {
		if l.State.Java, err = FindJava(); err != nil {
			return "", err
		}
	}
	sshd, err := FindSSHD()
	if err != nil {
		return "", err
	}
	if err := l.checkPorts(); err != nil {
		return "", err
	}
	if err := l.writeAll(ctx, sshd); err != nil {
		return "", fmt.Errorf("write lab files in %s: %w", l.Dir, err)
	}
	return sshd, nil
}

// startZooKeepers starts every ZooKeeper node that is not running,
// recording its pid.
func (l *Lab) startZooKeepers(out io.Writer) error {
	c := l.State.Config
	for n := 1; n <= c.ZooKeepers; n++ {
		if pid := l.zkPID(n); pid > 0 {
			continue
		}
		pid, err := spawnDetached(l.ZKDir(n), filepath.Join(l.ZKDir(n), "zookeeper.out"), l.zkArgv(n))
		if err != nil {
			return err
		}
		_ = os.WriteFile(filepath.Join(l.ZKDir(n), "zookeeper.pid"), []byte(strconv.Itoa(pid)+"\n"), 0o600)
		fmt.Fprintf(out, "  zookeeper %d  %s:%d  started (pid %d)\n", n, c.ZKHost(n), ZKPort, pid)
	}
	return nil
}

// startSSHDs starts the sshd of every lab host that is not running.
func (l *Lab) startSSHDs(sshd string, out io.Writer) error {
	for _, n := range l.sshHosts() {
		if l.sshdPID(n) > 0 {
			continue
		}
		if err := l.startSSHD(n, sshd); err != nil {
			return err
		}
		fmt.Fprintf(out, "  %s  %s:%d  started\n", sshLabel(n), l.hostAddr(n), SSHPort)
	}
	return nil
}

// upZooKeeperMode brings up a ZooKeeper-mode lab once its ZooKeeper nodes
// and sshds are started: the KDC (Kerberos labs), the quorum, the SCRAM
// users (secure labs), then the brokers, until every broker is registered
// and a controller is elected.
func (l *Lab) upZooKeeperMode(ctx context.Context, start time.Time, out io.Writer) error {
	c := l.State.Config
	if c.Kerberos {
		if err := l.startKDC(ctx, out); err != nil {
			return err
		}
	}
	zc, err := l.waitQuorum(ctx)
	if err != nil {
		return err
	}
	defer zc.Close()
	fmt.Fprintf(out, "  zookeeper quorum up after %.1fs\n", time.Since(start).Seconds())
	if c.Secure {
		if err := l.ensureSCRAM(ctx, zc, out); err != nil {
			return err
		}
	}
	if err := l.waitStaleRegistrations(ctx, zc, out); err != nil {
		return err
	}
	if err := l.startBrokers(ctx, out); err != nil {
		return err
	}
	if err := l.waitRegistered(ctx, zc, out); err != nil {
		return err
	}
	if err := l.formatControllers(ctx, zc, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "lab up in %.1fs: %d brokers registered under %s%s, controller elected\n",
		time.Since(start).Seconds(), c.Brokers, c.Chroot, kafkazk.BrokerIDsPath)
	fmt.Fprintf(out, "inventory: %s\n", l.InventoryPath())
	return nil
}

// waitStaleRegistrations waits, for each broker that is not running, until
// its old registration is gone. A broker killed outright leaves its
// ephemeral /brokers/ids/N until its ZooKeeper session expires; a new
// process with the same id would fail to register.
func (l *Lab) waitStaleRegistrations(ctx context.Context, zc *zookeeper.Conn, out io.Writer) error {
	for n := 1; n <= l.State.Config.Brokers; n++ {
		if l.brokerPID(n) > 0 {
			continue
		}
		ids, err := zc.BrokerIDs(ctx)
		if err != nil && !errors.Is(err, zookeeper.ErrNoNode) {
			return err
		}
		if slices.Contains(ids, int32(n)) {
			fmt.Fprintf(out, "  broker    %d  is not running but still registered: waiting for its old ZooKeeper session to expire\n", n)
			if _, err := zc.WaitBrokers(ctx, func(ids []int32) bool { return !slices.Contains(ids, int32(n)) }); err != nil {
				return fmt.Errorf("%w: broker %d's stale registration did not expire: %v", ErrNotHealthy, n, err)
			}
		}
	}
	return nil
}

// startBrokers runs, in parallel, the start script of every broker that is
// not running, and returns every failure joined, with what to do about a
// half-started lab.
func (l *Lab) startBrokers(ctx context.Context, out io.Writer) error {
	c := l.State.Config
	var wg sync.WaitGroup
	errs := make([]error, c.Brokers+1)
	for n := 1; n <= c.Brokers; n++ {
		if l.brokerPID(n) > 0 {
			continue
		}
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			b, err := exec.CommandContext(ctx, l.StartScript(n)).CombinedOutput()
			if err != nil {
				errs[n] = fmt.Errorf("broker %d did not start: %v\n%s", n, err, indent(string(b)))
				return
			}
			fmt.Fprintf(out, "  broker    %d  %s:%d  started (pid %d)\n", n, c.BrokerHost(n), KafkaPort, l.brokerPID(n))
		}(n)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w. The lab is half started: run `kremedy lab up --dir %s` again after fixing the cause, or `kremedy lab down --dir %s`", err, l.Dir, l.Dir)
	}
	return nil
}

// behaviour names what the lab's release and IBP do with a recreated
// topic's stale directories (the version's symptoms of the incident).
func (s State) behaviour() string {
	switch {
	case s.StuckRecreate():
		return "no topic IDs; a topic recreated after its znodes were deleted by hand gets no leaders (the controller still queues it for deletion, < 2.7)"
	case s.RefusesStaleLog():
		return "topic IDs; a stale directory is refused (INCONSISTENT_TOPIC_ID)"
	case s.TopicIDs():
		return "topic IDs, but a restarted broker adopts a stale directory (2.8)"
	default:
		return "no topic IDs; a stale directory is adopted silently"
	}
}

func ibpNote(s State) string {
	if s.KRaft() {
		return kraftNote(s)
	}
	ibp := "default"
	if s.Config.IBP != "" {
		ibp = s.Config.IBP
	}
	return fmt.Sprintf(", Kafka %s, inter.broker.protocol.version=%s (%s)", s.Kafka, ibp, s.behaviour())
}

func create(dir string, c Config) (*Lab, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w; %w", err, ErrBadConfig)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("%s exists, is not empty and holds no kremedy lab (no lab.json); nothing was started. Choose a new or empty --dir", dir)
	}
	home, version, err := ResolveKafkaHome(c.KafkaHome, c.KafkaVersion)
	if err != nil {
		return nil, err
	}
	c.KafkaHome = home
	sw := kafkaver.MustParse(version)
	if err := checkMode(sw, c.KRaft); err != nil {
		return nil, fmt.Errorf("%w (%s holds it); %w", err, home, ErrBadConfig)
	}
	if c.DynamicQuorum() && !sw.AtLeast(3, 9) {
		return nil, fmt.Errorf("--kraft-quorum %s with Kafka %s: a dynamic quorum (KIP-853, kafka-storage format --initial-controllers) needs 3.9 or later; use --kafka-version %s or %s, or --kraft-quorum %s; %w", QuorumDynamic, version, KafkaVersion, NewestKafka, QuorumStatic, ErrBadConfig)
	}
	if c.IBP != "" {
		sw, ibp := kafkaver.MustParse(version), kafkaver.MustParse(c.IBP)
		if ibp.Major > sw.Major || ibp.Major == sw.Major && ibp.Minor > sw.Minor {
			return nil, fmt.Errorf("--ibp %s: Kafka %s does not know inter.broker.protocol.version %s (it must not be newer than the release); %w", c.IBP, version, c.IBP, ErrBadConfig)
		}
	}
	java, err := FindJava()
	if err != nil {
		return nil, err
	}
	if err := checkJava(java, sw); err != nil {
		return nil, err
	}
	if _, err := FindSSHD(); err != nil {
		return nil, err
	}
	if c.Secure {
		if err := checkSecure(); err != nil {
			return nil, err
		}
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l := &Lab{Dir: dir, State: State{Format: FormatVersion, Created: time.Now().UTC(), Config: c, User: u.Username, Java: java, Kafka: version}}
	if c.KRaft {
		if l.State.ClusterID, err = newClusterID(); err != nil {
			return nil, err
		}
	}
	if c.DynamicQuorum() {
		l.State.DirectoryIDs = map[int]string{}
		for k := 1; k <= c.KRaftControllers; k++ {
			if l.State.DirectoryIDs[k], err = newClusterID(); err != nil {
				return nil, err
			}
		}
	}
	return l, l.Save()
}

// sameConfig refuses settings that differ from the existing lab's.
func (l *Lab) sameConfig(want Config, explicit func(string) bool) error {
	have := l.State.Config
	var diffs []string
	check := func(flag string, a, b any) {
		if explicit != nil && explicit(flag) && fmt.Sprint(a) != fmt.Sprint(b) {
			diffs = append(diffs, fmt.Sprintf("--%s %v (the lab has %v)", flag, a, b))
		}
	}
	check("brokers", want.Brokers, have.Brokers)
	check("zookeepers", want.ZooKeepers, have.ZooKeepers)
	check("chroot", want.Chroot, have.Chroot)
	check("log-dirs-per-broker", want.LogDirsPerBroker, have.LogDirsPerBroker)
	check("ibp", want.IBP, have.IBP)
	check("net", want.Net, have.Net)
	check("secure", want.Secure, have.Secure)
	check("kerberos", want.Kerberos, have.Kerberos)
	check("kraft-controllers", want.KRaftControllers, have.KRaftControllers)
	check("kraft", want.KRaft, have.KRaft)
	check("combined", want.Combined, have.Combined)
	check("tiered", want.Tiered, have.Tiered)
	check("kraft-quorum", want.KRaftQuorum, have.KRaftQuorum)
	check("racks", want.Racks, have.Racks)
	check("log-dir-size", want.LogDirSize, have.LogDirSize)
	check("kafka-version", want.KafkaVersion, l.State.Kafka)
	if explicit != nil && explicit("kafka-home") {
		if abs, _ := filepath.Abs(want.KafkaHome); abs != have.KafkaHome {
			diffs = append(diffs, fmt.Sprintf("--kafka-home %s (the lab has %s)", abs, have.KafkaHome))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w in %s: %s. Nothing was changed. Use another --dir, or remove this lab first with `kremedy lab down --dir %s --purge`",
			ErrConfigChanged, l.Dir, strings.Join(diffs, ", "), l.Dir)
	}
	return nil
}

func (l *Lab) writeAll(ctx context.Context, sshd string) error {
	c := l.State.Config
	if err := l.writeKeys(); err != nil {
		return err
	}
	var known []string
	for n := 1; n <= c.ZooKeepers; n++ {
		if err := l.writeZK(n); err != nil {
			return err
		}
	}
	for n := 1; n <= c.Brokers; n++ {
		if err := l.writeBroker(n); err != nil {
			return err
		}
	}
	for k := 1; k <= c.KRaftControllers; k++ {
		if err := l.writeController(k); err != nil {
			return err
		}
	}
	for _, n := range l.sshHosts() {
		line, err := l.writeSSHD(n, sshd)
		if err != nil {
			return err
		}
		known = append(known, line)
	}
	if c.Secure {
		if err := l.writeSecure(ctx); err != nil {
			return fmt.Errorf("secured lab: %w", err)
		}
	}
	if err := atomicfile.WriteFile(l.KnownHostsPath(), []byte(strings.Join(known, "\n")+"\n")); err != nil {
		return err
	}
	if err := inventory.Write(l.InventoryPath(), l.Inventory()); err != nil {
		return err
	}
	// The marker vouches that this inventory is a lab's: only then does
	// its lab: true waive an approval policy.
	if err := inventory.WriteLabMarker(l.InventoryPath()); err != nil {
		return err
	}
	return l.Save()
}

// Inventory describes the lab the way a user describes a real cluster: a
// KRaft lab's says mode: kraft and has no zookeeper section.
func (l *Lab) Inventory() *inventory.Inventory {
	c := l.State.Config
	inv := &inventory.Inventory{
		Name:  "kremedy-lab",
		Lab:   true,
		Note:  "written by `kremedy lab up`" + ibpNote(l.State),
		Kafka: inventory.Kafka{Bootstrap: c.Bootstrap()},
		SSH: inventory.SSH{
			User: l.State.User, Port: SSHPort, IdentityFile: l.KeyPath(), KnownHosts: l.KnownHostsPath(),
			ConnectTimeout: inventory.Duration{Duration: 10 * time.Second},
			// The lab's hosts are its own: no ~/.ssh/config rule of this
			// machine's user (a ProxyJump for 127.*, say) applies to them.
			Config: inventory.SSHConfigNone,
		},
	}
	if c.KRaft {
		inv.Mode = inventory.ModeKRaft
	} else {
		inv.ZooKeeper = inventory.ZooKeeper{Connect: c.ZKConnect()}
	}
	if c.Secure {
		if c.KRaft {
			inv.Note += "; secured: SASL_SSL (SCRAM-SHA-512), StandardAuthorizer ACLs, controllers on SASL_SSL (PLAIN), SSH as " + OperatorUser + " with sudo"
		} else {
			inv.Note += "; secured: SASL_SSL (SCRAM-SHA-512), ZooKeeper SASL ACLs (kremedy uses the superDigest operator), SSH as " + OperatorUser + " with sudo"
			inv.ZooKeeper.Auth = &inventory.ZKAuth{User: ZKOperator, PasswordFile: l.ZKOperatorPasswordFile()}
		}
		inv.Kafka.ClientProperties = l.ClientProperties()
		if c.Kerberos {
			inv.Kafka.Krb5Conf = l.Krb5Conf()
			inv.Note += "; Kerberized: GSSAPI (realm " + Realm + ", the operator's keytab)"
		}
		if c.hasControllers() {
			inv.Kafka.ControllerClientProperties = l.ControllerClientProperties()
		}
		inv.SSH.User, inv.SSH.Become = OperatorUser, inventory.BecomeSudo
	}
	for n := 1; n <= c.Brokers; n++ {
		inv.Brokers = append(inv.Brokers, inventory.Broker{
			ID: int32(n), Host: c.BrokerHost(n), Stop: l.StopScript(n), Start: l.StartScript(n), LogDirs: l.LogDirs(n),
			Config: filepath.Join(l.BrokerDir(n), "server.properties"), ServerLog: filepath.Join(l.BrokerDir(n), "logs", "server.log"),
		})
	}
	if c.Combined {
		// Each broker is a controller too: one process, listed twice.
		for _, b := range inv.Brokers {
			b.Listener, b.LogDirs, b.ServerLog = fmt.Sprintf("%s:%d", b.Host, ControllerPort), nil, ""
			inv.KRaftControllers = append(inv.KRaftControllers, b)
		}
	}
	for k := 1; k <= c.KRaftControllers; k++ {
		inv.KRaftControllers = append(inv.KRaftControllers, inventory.Broker{
			ID: ControllerID(k), Host: c.ControllerHost(k), Listener: fmt.Sprintf("%s:%d", c.ControllerHost(k), ControllerPort),
			Config: l.controllerProps(k), Stop: l.controllerScript(k, "stop"), Start: l.controllerScript(k, "start"),
		})
	}
	return inv
}

func (l *Lab) zkPID(n int) int {
	if p := readPid(filepath.Join(l.ZKDir(n), "zookeeper.pid")); alive(p) && slices.Contains(cmdline(p), "-Dkremedy.lab.zk="+strconv.Itoa(n)) {
		return p
	}
	for _, p := range procsWith("-Dkremedy.lab=" + l.Dir) {
		if slices.Contains(cmdline(p), "-Dkremedy.lab.zk="+strconv.Itoa(n)) {
			return p
		}
	}
	return 0
}

func (l *Lab) brokerPID(n int) int {
	if p := readPid(filepath.Join(l.BrokerDir(n), "kafka.pid")); alive(p) && slices.Contains(cmdline(p), l.brokerMarker(n)) {
		return p
	}
	if ps := procsWith(l.brokerMarker(n)); len(ps) > 0 {
		return ps[0]
	}
	return 0
}

func (l *Lab) sshdConfig(n int) string { return filepath.Join(l.SSHDir(n), "sshd_config") }

func (l *Lab) sshdPID(n int) int {
	// The listener's title names our config and "[listener]"; per-connection
	// children are titled "sshd: user@notty" and do not match.
	isOurs := func(p int) bool {
		cl := strings.Join(cmdline(p), " ")
		return strings.Contains(cl, l.sshdConfig(n)) && !strings.Contains(cl, " -R")
	}
	if p := readPid(filepath.Join(l.SSHDir(n), "sshd.pid")); alive(p) && isOurs(p) {
		return p
	}
	for _, p := range procsContaining(l.sshdConfig(n)) {
		if isOurs(p) {
			return p
		}
	}
	return 0
}

func (l *Lab) startSSHD(n int, sshd string) error {
	if os.Geteuid() == 0 {
		// OpenSSH's privilege-separation directory; Debian creates it only
		// when its own service starts.
		_ = os.MkdirAll("/run/sshd", 0o755)
	}
	logf := filepath.Join(l.SSHDir(n), "sshd.log")
	if b, err := exec.Command(sshd, "-t", "-f", l.sshdConfig(n)).CombinedOutput(); err != nil {
		return fmt.Errorf("sshd for broker host %d rejects its config %s: %v\n%s", n, l.sshdConfig(n), err, indent(string(b)))
	}
	// sshd daemonizes itself and writes its PidFile.
	if b, err := exec.Command(sshd, "-f", l.sshdConfig(n), "-E", logf).CombinedOutput(); err != nil {
		return fmt.Errorf("start sshd for broker host %d: %v\n%s", n, err, indent(string(b)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host := l.hostAddr(n)
	if err := waitFor(ctx, 20*time.Millisecond, func() bool { return listening(host, SSHPort) }); err != nil {
		return fmt.Errorf("sshd for broker host %d does not listen on %s:%d; see %s", n, host, SSHPort, logf)
	}
	return nil
}

// checkPorts refuses to start a part whose address another process holds.
func (l *Lab) checkPorts() error {
	c := l.State.Config
	var taken []string
	for n := 1; n <= c.ZooKeepers; n++ {
		if l.zkPID(n) > 0 {
			continue
		}
		for _, p := range []int{ZKPort, ZKPeerPort, ZKElectPort} {
			if addrInUse(c.ZKHost(n), p) {
				taken = append(taken, fmt.Sprintf("%s:%d (zookeeper %d)", c.ZKHost(n), p, n))
			}
		}
	}
	for n := 1; n <= c.Brokers; n++ {
		if l.brokerPID(n) == 0 && addrInUse(c.BrokerHost(n), KafkaPort) {
			taken = append(taken, fmt.Sprintf("%s:%d (broker %d)", c.BrokerHost(n), KafkaPort, n))
		}
	}
	for _, n := range l.sshHosts() {
		if l.sshdPID(n) == 0 && addrInUse(l.hostAddr(n), SSHPort) {
			taken = append(taken, fmt.Sprintf("%s:%d (sshd %d)", l.hostAddr(n), SSHPort, n))
		}
	}
	if c.Kerberos && l.kdcPID() == 0 && addrInUse(c.KDCHost(), KerberosPort) {
		taken = append(taken, fmt.Sprintf("%s:%d (the KDC)", c.KDCHost(), KerberosPort))
	}
	for k := 1; k <= c.KRaftControllers; k++ {
		if l.controllerPID(k) == 0 && addrInUse(c.ControllerHost(k), ControllerPort) {
			taken = append(taken, fmt.Sprintf("%s:%d (KRaft controller %d)", c.ControllerHost(k), ControllerPort, k))
		}
	}
	if len(taken) > 0 {
		return fmt.Errorf("%w: %s. Another process (perhaps another kremedy lab in a different --dir) holds them; nothing was started. Find it with `ss -ltnp`, stop it (`kremedy lab down --dir OTHER`), or run this lab on another loopback net with --net",
			ErrPortTaken, strings.Join(taken, ", "))
	}
	return nil
}

func (l *Lab) waitQuorum(ctx context.Context) (*zookeeper.Conn, error) {
	c := l.State.Config
	o := l.ZKOptions()
	o.SessionTimeout, o.Starting = 6*time.Second, true
	zc, err := zookeeper.Dial(ctx, c.ZKConnect(), o)
	if err != nil {
		var tails []string
		for n := 1; n <= c.ZooKeepers; n++ {
			if l.zkPID(n) == 0 {
				tails = append(tails, fmt.Sprintf("zookeeper %d is not running; last lines of %s:\n%s", n,
					filepath.Join(l.ZKDir(n), "zookeeper.out"), tail(filepath.Join(l.ZKDir(n), "zookeeper.out"), 15)))
			}
		}
		return nil, fmt.Errorf("%w: the ZooKeeper ensemble formed no quorum: %v\n%s", ErrNotHealthy, err, strings.Join(tails, "\n"))
	}
	return zc, nil
}

func (l *Lab) waitRegistered(ctx context.Context, zc *zookeeper.Conn, out io.Writer) error {
	c := l.State.Config
	want := make([]int32, 0, c.Brokers)
	for n := 1; n <= c.Brokers; n++ {
		want = append(want, int32(n))
	}
	ids, err := zc.WaitBrokers(ctx, func(ids []int32) bool { return slices.Equal(ids, want) })
	if err == nil {
		err = zc.WaitExists(ctx, kafkazk.ControllerPath, true)
	}
	// A broker registers in ZooKeeper before its socket server accepts
	// connections: a client dialing in between is refused.
	for n := 1; err == nil && n <= c.Brokers; n++ {
		err = waitFor(ctx, 20*time.Millisecond, func() bool { return listening(c.BrokerHost(n), KafkaPort) })
	}
	if err == nil && c.Secure {
		// The operator's client (waitMetadata's) needs its ACLs first.
		err = l.ensureACLs(ctx, out)
	}
	if err == nil {
		err = l.waitMetadata(ctx)
	}
	if err != nil {
		var why []string
		for n := 1; n <= c.Brokers; n++ {
			if !slices.Contains(ids, int32(n)) {
				log := filepath.Join(l.BrokerDir(n), "logs", "server.log")
				why = append(why, fmt.Sprintf("broker %d is not registered (process running: %v); last lines of %s:\n%s", n, l.brokerPID(n) > 0, log, tail(log, 15)))
			}
		}
		return fmt.Errorf("%w: registered brokers %v of %v, controller elected: %v (%v)\n%s\nThe lab is half started; `kremedy lab up --dir %s` retries, `kremedy lab down --dir %s` stops it",
			ErrNotHealthy, ids, want, err == nil, err, strings.Join(why, "\n"), l.Dir, l.Dir)
	}
	return nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return indent(strings.Join(lines, "\n"))
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// waitMetadata waits until every broker's metadata lists every broker and
// a controller: a broker registers, and listens, before the controller's
// UpdateMetadata reaches it, and a topic created in between is refused
// ("Replication factor: 3 larger than available brokers: 0").
func (l *Lab) waitMetadata(ctx context.Context) error {
	c := l.State.Config
	kc, err := kafka.New(c.Bootstrap(), l.KafkaOpts()...)
	if err != nil {
		return err
	}
	defer kc.Close()
	for n := 1; n <= c.Brokers; n++ {
		id := int32(n)
		err := waitFor(ctx, 100*time.Millisecond, func() bool {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			v, err := kc.BrokerView(rctx, id, "__kremedy-lab-probe")
			return err == nil && len(v.Brokers) == c.Brokers && v.Controller >= 0
		})
		if err != nil {
			return fmt.Errorf("broker %d's metadata does not list every broker and a controller: %w", id, err)
		}
	}
	return nil
}

// StartHost starts broker host n's sshd again when it is not running,
// leaving its broker as it is: a host that answers again while its broker
// stays down (offline-partition's dead leader, for the "wait for it" way).
func (l *Lab) StartHost(n int) error {
	if l.sshdPID(n) > 0 {
		return nil
	}
	sshd, err := FindSSHD()
	if err != nil {
		return err
	}
	return l.startSSHD(n, sshd)
}
