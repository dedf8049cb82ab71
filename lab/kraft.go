package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// The KRaft controller quorum of a lab provisioned for the ZooKeeper →
// KRaft migration (`lab up --kraft-controllers N`): controller k listens
// on 127.<Net>.3.k:9093 with node.id 3000+k and its own sshd, like a
// broker host. `lab up` writes and formats the controllers (with the ZK
// cluster's id, as the migration requires) but does not start them:
// starting them is the zk-to-kraft runbook's first change.
const (
	ControllerPort = 9093
	// controllerIDBase + k is controller k's node.id, far from the lab's
	// broker ids (1..9).
	controllerIDBase = 3000
	// ctrlHostBase + k is controller k's host index among the lab's SSH
	// hosts (1..Brokers are the brokers').
	ctrlHostBase = 100
)

// hasControllers reports whether the lab runs KRaft controllers: of their
// own, or combined nodes.
func (c Config) hasControllers() bool { return c.KRaftControllers > 0 || c.KRaft && c.Combined }

// ControllerID is KRaft controller k's node.id.
func ControllerID(k int) int32 { return int32(controllerIDBase + k) }

// ControllerHost is KRaft controller k's loopback address.
func (c Config) ControllerHost(k int) string { return fmt.Sprintf("127.%d.3.%d", c.Net, k) }

// Voters is controller.quorum.voters of the lab's quorum.
// The quorums of a KRaft lab (Config.KRaftQuorum).
const (
	QuorumStatic  = "static"
	QuorumDynamic = "dynamic"
)

// DynamicQuorum reports whether the lab's KRaft quorum is dynamic.
func (c Config) DynamicQuorum() bool { return c.KRaft && c.KRaftQuorum == QuorumDynamic }

// quorumProp is how a KRaft lab's nodes find the quorum: the static
// controller.quorum.voters, or a dynamic quorum's bootstrap servers.
func (c Config) quorumProp() string {
	if c.DynamicQuorum() {
		return "controller.quorum.bootstrap.servers=" + strings.Join(c.controllerAddrs(), ",")
	}
	return "controller.quorum.voters=" + c.Voters()
}

// initialControllers is a dynamic quorum's --initial-controllers:
// id@host:port:directory-id of every controller (KIP-853).
func (s State) initialControllers() string {
	var v []string
	for k := 1; k <= s.Config.KRaftControllers; k++ {
		v = append(v, fmt.Sprintf("%d@%s:%d:%s", ControllerID(k), s.Config.ControllerHost(k), ControllerPort, s.DirectoryIDs[k]))
	}
	return strings.Join(v, ",")
}

func (c Config) Voters() string {
	var v []string
	if c.Combined {
		for n := 1; n <= c.Brokers; n++ {
			v = append(v, fmt.Sprintf("%d@%s:%d", n, c.BrokerHost(n), ControllerPort))
		}
	}
	for k := 1; k <= c.KRaftControllers; k++ {
		v = append(v, fmt.Sprintf("%d@%s:%d", ControllerID(k), c.ControllerHost(k), ControllerPort))
	}
	return strings.Join(v, ",")
}

// hostAddr is the loopback address of SSH host n: a broker's, or a
// controller's for n > ctrlHostBase.
func (l *Lab) hostAddr(n int) string {
	if n > ctrlHostBase {
		return l.State.Config.ControllerHost(n - ctrlHostBase)
	}
	return l.State.Config.BrokerHost(n)
}

// sshLabel names SSH host n in `lab up` and `lab down` output: "sshd
// 2" for broker host 2, "sshd c1" for controller host 1.
func sshLabel(n int) string {
	if n > ctrlHostBase {
		return fmt.Sprintf("sshd      c%d", n-ctrlHostBase)
	}
	return fmt.Sprintf("sshd      %d", n)
}

// sshHosts are the lab's SSH hosts: every broker's, every controller's.
func (l *Lab) sshHosts() []int {
	var out []int
	for n := 1; n <= l.State.Config.Brokers; n++ {
		out = append(out, n)
	}
	for k := 1; k <= l.State.Config.KRaftControllers; k++ {
		out = append(out, ctrlHostBase+k)
	}
	return out
}

// ControllerDir is DIR/controller/K.
func (l *Lab) ControllerDir(k int) string { return l.path("controller", strconv.Itoa(k)) }

func (l *Lab) controllerProps(k int) string {
	return filepath.Join(l.ControllerDir(k), "controller.properties")
}

func (l *Lab) controllerMetadataDir(k int) string {
	return filepath.Join(l.ControllerDir(k), "metadata")
}

func (l *Lab) controllerScript(k int, action string) string {
	return filepath.Join(l.ControllerDir(k), "kafka-"+action)
}

func (l *Lab) controllerMarker(k int) string { return "-Dkremedy.lab.controller=" + l.ControllerDir(k) }

// writeController writes controller k's controller.properties, logging
// config and scripts. A migration lab's controller.properties is written
// once (the runbook's finalize edits it afterwards); a KRaft lab's is the
// lab's and written on every `lab up`.
func (l *Lab) writeController(k int) error {
	c := l.State.Config
	dir := l.ControllerDir(k)
	for _, d := range []string{l.controllerMetadataDir(k), filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	logs := logSetup{dir: filepath.Join(dir, "logs"), appenders: []string{"server"}}
	if c.KRaft {
		props, mode := l.kraftControllerProps(k), os.FileMode(0o644)
		if c.Secure {
			var err error
			if props, err = l.securedControllerProps(k); err != nil {
				return err
			}
			mode = 0o600 // it holds the controllers' passwords
		}
		if err := os.WriteFile(l.controllerProps(k), []byte(props), mode); err != nil {
			return err
		}
	} else {
		host := c.ControllerHost(k)
		props := fmt.Sprintf(`# KRaft controller %d of the kremedy lab, provisioned for the ZooKeeper
# → KRaft migration (KIP-866): migration enabled, the ZooKeeper cluster's
# zookeeper.connect, node ids apart from the brokers'.
process.roles=controller
node.id=%d
controller.quorum.voters=%s
controller.listener.names=CONTROLLER
listeners=CONTROLLER://%s:%d
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=%s
zookeeper.metadata.migration.enable=true
zookeeper.connect=%s
zookeeper.session.timeout.ms=6000
num.network.threads=2
num.io.threads=2
background.threads=2
`, k, ControllerID(k), c.Voters(), host, ControllerPort, l.controllerMetadataDir(k), c.ZKConnect())
		if c.Secure {
			var err error
			if props, err = l.securedControllerProps(k); err != nil {
				return err
			}
		}
		mode := os.FileMode(0o644)
		if c.Secure {
			mode = 0o600 // it holds the controllers' passwords
		}
		if _, err := os.Stat(l.controllerProps(k)); err != nil {
			if err := os.WriteFile(l.controllerProps(k), []byte(props), mode); err != nil {
				return err
			}
		}
		logs.loggers = []logTarget{{"org.apache.zookeeper", "WARN", ""}, {"org.apache.kafka.metadata.migration", "DEBUG", ""}}
	}
	if err := l.writeLogConfig(dir, logs); err != nil {
		return err
	}
	return l.writeScripts(proc{n: k, name: "kraft controller", dir: dir, marker: l.controllerMarker(k),
		props: l.controllerProps(k), start: l.controllerScript(k, "start"), stop: l.controllerScript(k, "stop"), heap: "-Xmx256m"})
}

// formatControllers formats every controller's metadata log dir with the
// ZooKeeper cluster's id (kafka-storage format), once.
func (l *Lab) formatControllers(ctx context.Context, zc *zookeeper.Conn, out io.Writer) error {
	c := l.State.Config
	if c.KRaftControllers == 0 {
		return nil
	}
	data, _, err := zc.Get(ctx, kafkazk.ClusterIDPath)
	if err != nil {
		return fmt.Errorf("read %s%s for the KRaft controllers: %w", c.Chroot, kafkazk.ClusterIDPath, err)
	}
	id := kafkazk.ClusterID(data)
	if id == "" {
		return fmt.Errorf("%s%s holds no cluster id: %q", c.Chroot, kafkazk.ClusterIDPath, data)
	}
	for k := 1; k <= c.KRaftControllers; k++ {
		if _, err := os.Stat(filepath.Join(l.controllerMetadataDir(k), "meta.properties")); err == nil {
			continue
		}
		if err := l.storageFormat(ctx, id, l.controllerProps(k), l.ControllerDir(k)); err != nil {
			return fmt.Errorf("kafka-storage format of KRaft controller %d: %w", k, err)
		}
		if c.Secure { // formatted as root: the service user runs it
			uid, gid, err := serviceIDs()
			if err == nil {
				err = chownTree(l.ControllerDir(k), uid, gid)
			}
			if err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "  kraft controller %d  %s:%d  node.id %d, formatted with cluster id %s (not started: zk-to-kraft starts it)\n",
			k, c.ControllerHost(k), ControllerPort, ControllerID(k), id)
	}
	return nil
}

// storageFormat runs Kafka's own storage tool (`kafka-storage format
// --cluster-id=ID -c PROPS --ignore-formatted`: kafka.tools.StorageTool, as
// bin/kafka-storage.sh does) on a node's config: every log dir it names,
// the metadata log dir included, gets meta.properties with the cluster
// id and the node id; the directories formatted already are left alone.
func (l *Lab) storageFormat(ctx context.Context, clusterID, props, dir string, extra ...string) error {
	args := []string{"-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		l.logJVMArg(dir), "-cp", filepath.Join(l.libsDir(), "*"), "kafka.tools.StorageTool",
		// --cluster-id=ID: a ZooKeeper-mode cluster's id may start with
		// '-' (one in 64 do), which the tool would take for an option.
		"format", "--cluster-id=" + clusterID, "-c", props, "--ignore-formatted"}
	cmd := exec.CommandContext(ctx, l.State.Java, append(args, extra...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, indent(string(b)))
	}
	return nil
}

// controllerPID is controller k's JVM, 0 when it does not run.
func (l *Lab) controllerPID(k int) int {
	if ps := procsWith(l.controllerMarker(k)); len(ps) > 0 {
		return ps[0]
	}
	return 0
}

// ControllerPID is controller k's JVM (for tests), 0 when it does not run.
func (l *Lab) ControllerPID(k int) int { return l.controllerPID(k) }

// stopControllers stops the controllers that run.
func (l *Lab) stopControllers(ctx context.Context, out io.Writer) {
	for k := 1; k <= l.State.Config.KRaftControllers; k++ {
		if pid := l.controllerPID(k); pid > 0 {
			stopJVM(ctx, l.controllerScript(k, "stop"), pid, fmt.Sprintf("kraft controller %d", k), out)
		}
	}
}
