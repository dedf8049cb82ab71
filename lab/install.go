package lab

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

//go:embed pom.xml
var pom []byte

// KafkaVersion is the Kafka release `kremedy lab install` fetches.
var KafkaVersion = func() string {
	m := regexp.MustCompile(`<kafka.version>([^<]+)</kafka.version>`).FindSubmatch(pom)
	return string(m[1])
}()

// DefaultKafkaHome is where `kremedy lab install` puts the jars.
func DefaultKafkaHome() string { return filepath.Join(CacheDir(), "kafka-"+KafkaVersion) }

// ResolveKafkaHome picks --kafka-home, then $KAFKA_HOME, then the install
// cache, and checks it holds a ZooKeeper-mode (3.x) Kafka.
func ResolveKafkaHome(flag string) (home, version string, err error) {
	home = flag
	src := "--kafka-home"
	if home == "" {
		home, src = os.Getenv("KAFKA_HOME"), "KAFKA_HOME"
	}
	if home == "" {
		home, src = DefaultKafkaHome(), "the kremedy cache"
	}
	version, err = CheckKafkaHome(home)
	if err != nil {
		return "", "", fmt.Errorf("Kafka home from %s: %w", src, err)
	}
	abs, _ := filepath.Abs(home)
	return abs, version, nil
}

var kafkaJar = regexp.MustCompile(`^kafka_2\.1[23]-(\d+)\.(\d+)\.(\d+)\.jar$`)

// CheckKafkaHome verifies HOME/libs holds the broker jar, ZooKeeper and a
// logging backend, and returns the Kafka version.
func CheckKafkaHome(home string) (string, error) {
	libs := filepath.Join(home, "libs")
	ents, err := os.ReadDir(libs)
	if err != nil {
		return "", fmt.Errorf("%w: no Kafka jars at %s (%v). Run `kremedy lab install` (or `make lab-install`), or pass --kafka-home with an Apache Kafka 3.9.x distribution", ErrMissingPart, libs, err)
	}
	var version string
	var zk, log4j bool
	for _, e := range ents {
		n := e.Name()
		if m := kafkaJar.FindStringSubmatch(n); m != nil {
			version = m[1] + "." + m[2] + "." + m[3]
			if m[1] != "3" {
				return "", fmt.Errorf("%w: %s holds Kafka %s; the lab needs ZooKeeper mode, which ended with 3.9. Use an Apache Kafka 3.9.x distribution or `kremedy lab install`", ErrMissingPart, libs, version)
			}
		}
		zk = zk || strings.HasPrefix(n, "zookeeper-3")
		log4j = log4j || strings.HasPrefix(n, "reload4j-") || strings.HasPrefix(n, "log4j-1")
	}
	switch {
	case version == "":
		return "", fmt.Errorf("%w: %s has no kafka_2.13-3.x.jar. Run `kremedy lab install`, or pass --kafka-home with an Apache Kafka 3.9.x distribution", ErrMissingPart, libs)
	case !zk:
		return "", fmt.Errorf("%w: %s has no zookeeper jar", ErrMissingPart, libs)
	case !log4j:
		return "", fmt.Errorf("%w: %s has no log4j backend (reload4j); Kafka would run without logs. Run `kremedy lab install`", ErrMissingPart, libs)
	}
	return version, nil
}

// Install fetches Kafka and its runtime classpath from Maven Central into
// home/libs with Maven, using the pom embedded in kremedy (lab/pom.xml).
func Install(ctx context.Context, home string, out io.Writer) error {
	if v, err := CheckKafkaHome(home); err == nil {
		fmt.Fprintf(out, "Kafka %s is already installed at %s\n", v, home)
		return nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("%w: Maven (mvn) is not on PATH; install it (Debian: apt-get install maven) or pass --kafka-home with an Apache Kafka 3.9.x distribution", ErrMissingPart)
	}
	tmp, err := os.MkdirTemp("", "kremedy-pom-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "pom.xml"), pom, 0o600); err != nil {
		return err
	}
	libs := filepath.Join(home, "libs")
	if err := os.MkdirAll(libs, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(out, "fetching Kafka %s and its runtime classpath from Maven Central into %s\n", KafkaVersion, libs)
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", filepath.Join(tmp, "pom.xml"),
		"dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+libs)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("maven could not fetch Kafka %s: %w (nothing else was changed; %s may hold a partial download, rerun to resume)", KafkaVersion, err, libs)
	}
	v, err := CheckKafkaHome(home)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Kafka %s installed at %s\n", v, home)
	return nil
}

// FindJava locates a java binary ($JAVA_HOME/bin/java, then PATH).
func FindJava() (string, error) {
	if jh := os.Getenv("JAVA_HOME"); jh != "" {
		p := filepath.Join(jh, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w: java is not on PATH and JAVA_HOME is unset; Kafka 3.9 needs Java 11 or 17 (Debian: apt-get install openjdk-17-jre-headless)", ErrMissingPart)
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p, nil
}

// FindSSHD locates OpenSSH's sshd.
func FindSSHD() (string, error) {
	for _, p := range []string{"/usr/sbin/sshd", "/usr/local/sbin/sshd"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("sshd"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: OpenSSH sshd not found; each lab broker host runs a real sshd (Debian: apt-get install openssh-server)", ErrMissingPart)
}
