package lab

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/internal/shell"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func (l *Lab) writeZK(n int) error {
	c := l.State.Config
	dir := l.ZKDir(n)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# ZooKeeper node %d of the kremedy lab
tickTime=1000
initLimit=20
syncLimit=5
dataDir=%s
clientPort=%d
clientPortAddress=%s
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr
`, n, filepath.Join(dir, "data"), ZKPort, c.ZKHost(n))
	if c.ZooKeepers > 1 {
		for i := 1; i <= c.ZooKeepers; i++ {
			fmt.Fprintf(&b, "server.%d=%s:%d:%d\n", i, c.ZKHost(i), ZKPeerPort, ZKElectPort)
		}
	}
	if c.Secure {
		tlsCfg, err := l.zkTLSServer(n)
		if err != nil {
			return err
		}
		b.WriteString(tlsCfg)
	}
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(b.String()), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "myid"), []byte(strconv.Itoa(n)+"\n"), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "log4j.properties"), []byte(fmt.Sprintf(`log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=%s
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%%d] %%p %%m (%%c)%%n
`, filepath.Join(dir, "zookeeper.log"))), 0o600)
}

// zkArgv is the command line of ZooKeeper node n. The -D marker lets
// `lab down` find the process even when its pid file is gone.
func (l *Lab) zkArgv(n int) []string {
	dir := l.ZKDir(n)
	argv := []string{l.State.Java,
		"-Xms32m", "-Xmx" + cmp.Or(l.State.Config.ZKHeap, "128m"), "-XX:+UseSerialGC", jit(l.State.Config.ZKHeap), "-Djava.awt.headless=true",
		"-Dkremedy.lab=" + l.Dir, "-Dkremedy.lab.zk=" + strconv.Itoa(n),
		"-Dlog4j.configuration=file:" + filepath.Join(dir, "log4j.properties"),
		"-Dzookeeper.admin.enableServer=false"}
	if l.State.Config.Secure {
		argv = append(argv, l.zkSecurityArgs(n)...)
	}
	return append(argv, "-cp", filepath.Join(l.libsDir(), "*"),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
}

func (l *Lab) writeBroker(n int) error {
	c := l.State.Config
	dir := l.BrokerDir(n)
	for _, d := range append(l.LogDirs(n), filepath.Join(dir, "logs")) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := l.mountLogDirs(n); err != nil {
		return err
	}
	props, err := l.kraftBrokerProps(n)
	if !c.KRaft {
		props, err = l.zkBrokerProps(n)
	}
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "server.properties")
	// A lab provisioned for the ZooKeeper → KRaft migration hands its
	// brokers' configs to the operator (the zk-to-kraft runbook edits them
	// over SSH): `lab up` writes them once and never undoes an edit.
	if _, err := os.Stat(cfg); err == nil && c.KRaftControllers > 0 && !c.KRaft {
		props = ""
	}
	if props != "" {
		if err := l.writeBrokerConfig(cfg, props); err != nil {
			return err
		}
	}
	if err := l.writeLogConfig(dir, brokerLogs(filepath.Join(dir, "logs"))); err != nil {
		return err
	}
	return l.writeBrokerScripts(n)
}

// writeBrokerConfig writes a broker's server.properties: a secured lab's
// holds passwords (its keystore's, its logins'), so it is the service
// user's alone (0600), as the controllers' files are; the operator reads
// it through sudo.
func (l *Lab) writeBrokerConfig(cfg, props string) error {
	if !l.State.Config.Secure {
		return os.WriteFile(cfg, []byte(props), 0o644)
	}
	uid, gid, err := serviceIDs()
	if err != nil {
		return err
	}
	return writeOwned(cfg, props, uid, gid)
}

// brokerDefaults are the settings every lab broker shares, in either mode:
// small thread pools, replication sized to the lab, quick deletes.
func (l *Lab) brokerDefaults() string {
	c := l.State.Config
	rf := min(3, c.Brokers)
	minISR := 1
	if rf == 3 {
		minISR = 2
	}
	return fmt.Sprintf(`delete.topic.enable=true
auto.create.topics.enable=true
num.partitions=3
default.replication.factor=%d
min.insync.replicas=%d
offsets.topic.replication.factor=%d
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=%d
transaction.state.log.min.isr=%d
transaction.state.log.num.partitions=3
group.initial.rebalance.delay.ms=0
log.segment.delete.delay.ms=1000
log.initial.task.delay.ms=1000
replica.lag.time.max.ms=10000
log.cleaner.dedupe.buffer.size=2097152
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
background.threads=2
controlled.shutdown.enable=true
`, rf, minISR, rf, rf, minISR) + l.sizeLimitedDefaults()
}

// zkBrokerProps is broker n's server.properties in ZooKeeper mode.
func (l *Lab) zkBrokerProps(n int) (string, error) {
	c := l.State.Config
	props := fmt.Sprintf(`# Kafka broker %d of the kremedy lab (ZooKeeper mode)
broker.id=%d
listeners=PLAINTEXT://%s:%d
log.dirs=%s
zookeeper.connect=%s
zookeeper.session.timeout.ms=6000
zookeeper.connection.timeout.ms=10000
`, n, n, c.BrokerHost(n), KafkaPort, strings.Join(l.LogDirs(n), ","), c.ZKConnect()) + l.brokerDefaults() + "controlled.shutdown.max.retries=1\n" + c.rackProp(n)
	if c.IBP != "" {
		props += "inter.broker.protocol.version=" + c.IBP + "\n"
	}
	if c.Secure {
		sec, err := l.brokerSecurity(n)
		if err != nil {
			return "", err
		}
		props = strings.Replace(props, fmt.Sprintf("listeners=PLAINTEXT://%s:%d\n", c.BrokerHost(n), KafkaPort), sec, 1)
	}
	return props, nil
}

// StartScript and StopScript are broker n's unit-like commands; the
// inventory runs them over SSH.
func (l *Lab) StartScript(n int) string { return filepath.Join(l.BrokerDir(n), "kafka-start") }
func (l *Lab) StopScript(n int) string  { return filepath.Join(l.BrokerDir(n), "kafka-stop") }

func (l *Lab) brokerMarker(n int) string { return "-Dkremedy.lab.broker=" + l.BrokerDir(n) }

func (l *Lab) writeBrokerScripts(n int) error {
	return l.writeScripts(proc{n: n, name: "kafka broker", dir: l.BrokerDir(n), marker: l.brokerMarker(n),
		props: filepath.Join(l.BrokerDir(n), "server.properties"), start: l.StartScript(n), stop: l.StopScript(n), heap: "-Xmx" + cmp.Or(l.State.Config.BrokerHeap, "512m"),
		jit: jit(l.State.Config.BrokerHeap)})
}

// proc is one lab JVM the inventory stops and starts with unit-like
// scripts: a broker or a KRaft controller.
type proc struct {
	n                  int
	name               string // "kafka broker"
	dir, marker, props string
	start, stop        string
	heap               string
	jit                string // "": C1 only, the lab's default (jit)
}

// jit is a lab JVM's JIT flag: C1 only (-XX:TieredStopAtLevel=1: it
// starts fast and a small lab never runs long enough for C2 to pay) by
// default; the JVM's full tiered JIT, as in production, when the part was
// given a heap of its own (--zk-heap, --broker-heap: a lab sized for
// scale). -XX:+UseSerialGC stays either way (one GC thread on 2 cores).
func jit(heap string) string {
	if heap != "" {
		return "-XX:+TieredCompilation"
	}
	return "-XX:TieredStopAtLevel=1"
}

// writeScripts writes pr's start and stop scripts, shaped like a unit's
// ExecStart and ExecStop.
func (l *Lab) writeScripts(pr proc) error {
	common := scriptPrelude(pr)
	if err := os.WriteFile(pr.start, []byte(startScript(pr, common, l.javaCommand(pr))), 0o755); err != nil {
		return err
	}
	return os.WriteFile(pr.stop, []byte(stopScript(common)), 0o755)
}

// javaCommand is pr's JVM command line, shell-quoted: java with the lab's
// flags and pr's marker, as the service user with its JAAS (and Kerberos)
// settings in a secure lab, running kafka.Kafka on pr's properties.
func (l *Lab) javaCommand(pr proc) string {
	dir := pr.dir
	jvm := []string{l.State.Java,
		"-Xms128m", pr.heap, "-XX:+UseSerialGC", cmp.Or(pr.jit, "-XX:TieredStopAtLevel=1"), "-Djava.awt.headless=true",
		"-Dkremedy.lab=" + l.Dir, pr.marker,
		l.logJVMArg(dir),
		"-Dkafka.logs.dir=" + filepath.Join(dir, "logs")}
	if l.State.Config.Secure {
		// As a service unit's User=: the broker runs as the service user.
		jvm = append([]string{"setpriv", "--reuid=" + ServiceUser, "--regid=" + ServiceUser, "--init-groups", "--"}, jvm...)
		jvm = append(jvm, "-Djava.security.auth.login.config="+filepath.Join(dir, "jaas.conf"))
		if l.State.Config.Kerberos {
			jvm = append(jvm, "-Djava.security.krb5.conf="+l.Krb5Conf())
		}
	}
	jvm = append(jvm, "-cp", l.classpath(), "kafka.Kafka", pr.props)
	var q []string
	for _, a := range jvm {
		q = append(q, shell.Quote(a))
	}
	return strings.Join(q, " ")
}

// scriptPrelude is what pr's start and stop scripts share: its pid file,
// logs and marker, and the shell functions that tell whether pr's JVM is
// alive.
func scriptPrelude(pr proc) string {
	n, dir := pr.n, pr.dir
	return fmt.Sprintf(`set -u
N=%d
PIDFILE=%s
OUT=%s
SERVERLOG=%s
MARK=%s
# exists PID: the process exists and is not a zombie
exists() {
  [ -r "/proc/$1/stat" ] || return 1
  case "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" in Z|X|"") return 1;; esac
}
# alive PID: it exists and is this broker's JVM (not a reused pid)
alive() {
  exists "$1" && tr '\0' '\n' < "/proc/$1/cmdline" 2>/dev/null | grep -qxF -- "$MARK"
}
pid() { [ -s "$PIDFILE" ] && cat "$PIDFILE"; }
NAME=%s
`, n, shell.Quote(filepath.Join(dir, "kafka.pid")), shell.Quote(filepath.Join(dir, "logs", "kafka.out")), shell.Quote(filepath.Join(dir, "logs", "server.log")), shell.Quote(pr.marker), shell.Quote(pr.name))
}

// startScript is pr's start script, like `systemctl start kafka`: it
// starts java (the quoted command line) detached and fails when the JVM
// exits during start-up.
func startScript(pr proc, common, java string) string {
	return "#!/bin/sh\n# kafka-start: start this lab broker detached, like `systemctl start kafka`.\n" + common + fmt.Sprintf(`p=$(pid)
if [ -n "$p" ] && alive "$p"; then echo "$NAME $N is already running (pid $p)"; exit 0; fi
cd %s || exit 1
setsid %s >>"$OUT" 2>&1 </dev/null &
p=$!
echo "$p" > "$PIDFILE"
echo "$NAME $N starting (pid $p), log: $OUT"
# Like a unit whose main process dies at once: a broker that cannot even
# start (bad config, port taken) fails the start command.
i=0
while [ $i -lt 20 ]; do
  # exists, not alive: until setsid has exec'd java the marker is not there yet
  if ! exists "$p"; then
    echo "$NAME $N exited during start-up; last lines of $OUT and $SERVERLOG:" >&2
    tail -n 5 "$OUT" >&2
    tail -n 25 "$SERVERLOG" >&2
    exit 1
  fi
  sleep 0.1; i=$((i+1))
done
echo "$NAME $N started"
`, shell.Quote(pr.dir), java)
}

// stopScript is a start script's partner, like `systemctl stop kafka`:
// SIGTERM, then a bounded wait for the controlled shutdown, never SIGKILL.
func stopScript(common string) string {
	return "#!/bin/sh\n# kafka-stop [TIMEOUT_SECONDS]: SIGTERM, then wait for the controlled shutdown\n# to finish, like `systemctl stop kafka`. Exits 1 if the broker is still\n# running after the timeout (default 90 s); it never escalates to SIGKILL.\n" + common + `TIMEOUT=${1:-${KAFKA_STOP_TIMEOUT:-90}}
p=$(pid)
if [ -z "$p" ] || ! alive "$p"; then echo "$NAME $N is not running"; rm -f "$PIDFILE"; exit 0; fi
echo "stopping $NAME $N (pid $p): SIGTERM, waiting up to ${TIMEOUT}s for a controlled shutdown"
kill -TERM "$p" 2>/dev/null
i=0
while alive "$p"; do
  if [ $i -ge $((TIMEOUT * 10)) ]; then
    echo "$NAME $N (pid $p) did not stop within ${TIMEOUT}s; it is still running" >&2
    exit 1
  fi
  sleep 0.1; i=$((i+1))
done
rm -f "$PIDFILE"
echo "$NAME $N stopped after $((i / 10)).$((i % 10))s"
`
}

// writeKeys creates the lab user's key pair and authorized_keys once.
func (l *Lab) writeKeys() error {
	if _, err := os.Stat(l.KeyPath()); err == nil {
		return nil
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(priv, "kremedy-lab")
	if err != nil {
		return err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.KeyPath(), pem.EncodeToMemory(block), 0o600); err != nil {
		return err
	}
	line := ssh.MarshalAuthorizedKey(sp)
	if err := os.WriteFile(l.KeyPath()+".pub", line, 0o644); err != nil {
		return err
	}
	return os.WriteFile(l.path("authorized_keys"), line, 0o600)
}

// writeSSHD writes broker host n's sshd config and host keys (ed25519 and
// RSA, so that clients meet the real host-key negotiation) once, and
// returns the known_hosts line for its ed25519 key.
func (l *Lab) writeSSHD(n int, sshd string) (string, error) {
	dir := l.SSHDir(n)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	edPath := filepath.Join(dir, "ssh_host_ed25519_key")
	rsaPath := filepath.Join(dir, "ssh_host_rsa_key")
	if _, err := os.Stat(edPath); err != nil {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return "", err
		}
		if err := writeHostKey(edPath, priv); err != nil {
			return "", err
		}
		rk, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return "", err
		}
		if err := writeHostKey(rsaPath, rk); err != nil {
			return "", err
		}
	}
	b, err := os.ReadFile(edPath)
	if err != nil {
		return "", err
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", edPath, err)
	}
	host := l.hostAddr(n)
	cfg := fmt.Sprintf(`# sshd of lab host %d (%s)
ListenAddress %s:%d
HostKey %s
HostKey %s
PidFile %s
AuthorizedKeysFile %s
AllowUsers %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
StrictModes no
PrintMotd no
MaxStartups 50:30:100
MaxSessions 50
LogLevel VERBOSE
# Broker hosts in production do not run the engineer's interactive shell
# set-up. bash sources ~/.bashrc for commands sent by sshd only when SHLVL
# says it is a top-level shell; on a workstation that file may run pyenv or
# nvm (150 ms of CPU per command on the machine this was written on) and
# print to stderr, which would be charged to kremedy and streamed as broker
# output.
SetEnv SHLVL=1
`, n, host, host, SSHPort, edPath, rsaPath, filepath.Join(dir, "sshd.pid"), l.path("authorized_keys"), l.sshUser())
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600); err != nil {
		return "", err
	}
	return knownhosts.Line([]string{knownhosts.Normalize(fmt.Sprintf("%s:%d", host, SSHPort))}, signer.PublicKey()), nil
}

func writeHostKey(path string, key any) error {
	block, err := ssh.MarshalPrivateKey(key, "kremedy-lab-host")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return err
	}
	s, err := ssh.NewSignerFromKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(s.PublicKey()), 0o644)
}

// sshUser is the login the lab's sshd allows: on a secured lab the
// operator, and NoSudoUser for rehearsing a login without sudo rights;
// this machine's user otherwise.
func (l *Lab) sshUser() string {
	if l.State.Config.Secure {
		return OperatorUser + " " + NoSudoUser
	}
	return l.State.User
}
