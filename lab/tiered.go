package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A tiered lab (--tiered) runs Kafka's tiered storage (KIP-405) with the
// remote storage manager Kafka's own tests use, LocalTieredStorage: the
// "remote" copies go to a directory of the lab (RemoteStorageDir), so a
// rehearsal sees segments uploaded, then deleted locally once past
// local.retention.*, still readable. It ships in kafka-storage's test jar
// (Maven Central, org.apache.kafka:kafka-storage:V:jar:test), fetched
// once into the Kafka home's tiered/ directory.

// tieredJar is the jar holding LocalTieredStorage in the Kafka home.
func (l *Lab) tieredJar() string {
	return filepath.Join(l.State.Config.KafkaHome, "tiered", "kafka-storage-"+l.State.Kafka+"-test.jar")
}

// RemoteStorageDir is where the tiered lab's LocalTieredStorage keeps the
// uploaded segments.
func (l *Lab) RemoteStorageDir() string { return l.path("remote-storage") }

// classpath is the brokers' classpath: the Kafka home's jars, and in a
// tiered lab LocalTieredStorage's.
func (l *Lab) classpath() string {
	cp := filepath.Join(l.libsDir(), "*")
	if l.State.Config.Tiered {
		cp += string(os.PathListSeparator) + l.tieredJar()
	}
	return cp
}

// tieredProps are a tiered lab's broker settings (server.properties);
// "" in any other lab. Remote log metadata goes to a 3-partition topic,
// and uploads are looked for every second (30 s by default).
func (l *Lab) tieredProps() string {
	c := l.State.Config
	if !c.Tiered {
		return ""
	}
	return fmt.Sprintf(`# tiered storage (kremedy lab --tiered): Kafka's LocalTieredStorage
remote.log.storage.system.enable=true
remote.log.storage.manager.class.name=org.apache.kafka.server.log.remote.storage.LocalTieredStorage
remote.log.storage.manager.impl.prefix=rsm.config.
rsm.config.dir=%s
remote.log.metadata.manager.listener.name=PLAINTEXT
remote.log.metadata.manager.impl.prefix=rlmm.config.
rlmm.config.remote.log.metadata.topic.num.partitions=3
rlmm.config.remote.log.metadata.topic.replication.factor=%d
remote.log.manager.task.interval.ms=1000
log.retention.check.interval.ms=1000
`, l.RemoteStorageDir(), min(3, c.Brokers))
}

// tieredControllerProps is what a tiered lab's controllers need: the
// controller checks a topic's remote.storage.enable against it when the
// topic is created or altered.
func (l *Lab) tieredControllerProps() string {
	if !l.State.Config.Tiered {
		return ""
	}
	return "remote.log.storage.system.enable=true\n"
}

// fetchTiered puts LocalTieredStorage's jar in the Kafka home when it is
// not there (Maven, as lab install does) and makes the remote store.
func (l *Lab) fetchTiered(ctx context.Context, out io.Writer) error {
	if !l.State.Config.Tiered {
		return nil
	}
	if !strings.HasPrefix(l.State.Kafka, "4.") {
		return fmt.Errorf("--tiered on Kafka %s: the lab's tiered storage needs Kafka 4.x (LocalTieredStorage of its kafka-storage test jar); use --kafka-version 4.1.2", l.State.Kafka)
	}
	if err := os.MkdirAll(l.RemoteStorageDir(), 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(l.tieredJar()); err == nil {
		return nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("%w: --tiered needs Maven (mvn) to fetch LocalTieredStorage (org.apache.kafka:kafka-storage:%s:jar:test); install it (Debian: apt-get install maven)", ErrMissingPart, l.State.Kafka)
	}
	fmt.Fprintf(out, "fetching LocalTieredStorage (kafka-storage %s test jar) from Maven Central into %s\n", l.State.Kafka, filepath.Dir(l.tieredJar()))
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-Dstyle.color=never", "dependency:copy", "-Dartifact=org.apache.kafka:kafka-storage:"+l.State.Kafka+":jar:test",
		"-DoutputDirectory="+filepath.Dir(l.tieredJar()))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("maven could not fetch kafka-storage %s's test jar (LocalTieredStorage): %w; nothing was started", l.State.Kafka, err)
	}
	if _, err := os.Stat(l.tieredJar()); err != nil {
		return fmt.Errorf("maven fetched kafka-storage %s's test jar but %s is not there: %w", l.State.Kafka, l.tieredJar(), err)
	}
	return nil
}
