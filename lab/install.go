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
	"text/template"

	"github.com/kremedy/kremedy/internal/kafkaver"
)

//go:embed pom.xml
var pomTemplate string

// Artifact is one Maven coordinate.
type Artifact struct{ Group, Name, Version string }

// Release is a Kafka release the lab installs and runs. Kafka's POM carries
// no logging backend; Logging is the one the release's tarball ships
// (gradle/dependencies.gradle at its tag).
type Release struct {
	Version string
	Logging []Artifact
	// Tested says the test suite runs this release's lab (make test or make
	// test-versions); other 2.4–4.x releases are accepted, untested.
	Tested bool
	// Modes are the lab modes the release runs: ZooKeeper mode (2.4–3.9),
	// KRaft (`lab up --kraft`: 3.7 and later; the only one from 4.0).
	Modes Modes
}

// Modes is a set of lab modes.
type Modes uint8

// The lab's modes.
const (
	ZooKeeperMode Modes = 1 << iota
	KRaftMode
)

// Has reports whether m includes mode.
func (m Modes) Has(mode Modes) bool { return m&mode != 0 }

func (m Modes) String() string {
	switch m {
	case ZooKeeperMode:
		return "ZooKeeper mode"
	case KRaftMode:
		return "KRaft only"
	case ZooKeeperMode | KRaftMode:
		return "ZooKeeper mode and KRaft"
	}
	return "no mode"
}

// ModesOf are the lab modes release v runs: ZooKeeper mode from 2.4 to 3.9,
// KRaft from 3.7 (the first release that marks a recreated topic's old
// logs stray, KAFKA-14616, and answers DescribeQuorum on the controller
// listener, KIP-919); 4.0 removed ZooKeeper mode.
func ModesOf(v kafkaver.Version) Modes {
	var m Modes
	if v.AtLeast(2, 4) && v.Before(4, 0) {
		m |= ZooKeeperMode
	}
	if v.AtLeast(3, 7) {
		m |= KRaftMode
	}
	return m
}

func log4j12(slf4j string) []Artifact {
	return []Artifact{{"log4j", "log4j", "1.2.17"}, {"org.slf4j", "slf4j-log4j12", slf4j}}
}

var reload4j = []Artifact{{"ch.qos.reload4j", "reload4j", "1.2.25"}, {"org.slf4j", "slf4j-reload4j", "1.7.36"}}

// log4j2 is Kafka 4's backend at version v: what the release tarball adds
// to the runtime classpath (build.gradle's log4j libraries, named in
// gradle/dependencies.gradle: slf4jLog4j2 = log4j-slf4j-impl, the binding
// of Kafka's slf4j 1.7 API; log4j1Bridge2Api = log4j-1.2-api for old
// log4j.properties files). log4j-api and log4j-core come with kafka-server's
// POM; they are pinned here to the same v so that the four agree. v is the
// log4j-core version kafka-server-V.pom names.
func log4j2(v string) []Artifact {
	return []Artifact{
		{"org.apache.logging.log4j", "log4j-api", v}, {"org.apache.logging.log4j", "log4j-core", v},
		{"org.apache.logging.log4j", "log4j-slf4j-impl", v}, {"org.apache.logging.log4j", "log4j-1.2-api", v},
	}
}

// Releases are the releases kremedy's lab is tested with, oldest first.
var Releases = []Release{
	{"2.4.1", log4j12("1.7.28"), true, ZooKeeperMode},
	{"2.7.2", log4j12("1.7.30"), true, ZooKeeperMode},
	{"2.8.2", log4j12("1.7.30"), true, ZooKeeperMode},
	{"3.4.1", reload4j, true, ZooKeeperMode},
	{"3.9.2", reload4j, true, ZooKeeperMode | KRaftMode},
	// kafka-server-4.1.2.pom: log4j-core 2.25.3; 4.4.0's: 2.25.5.
	{"4.1.2", log4j2("2.25.3"), true, KRaftMode},
	{NewestKafka, log4j2("2.25.5"), true, KRaftMode},
}

// KafkaVersion is the release `kremedy lab install` and `lab up` use when
// no version is named.
const KafkaVersion = "3.9.2"

// NewestKafka is the newest release the lab is tested with (KRaft only;
// `make test-versions`).
const NewestKafka = "4.4.0"

// ReleaseOf returns the release to install for version v: a tested one, or
// any other release from 2.4.0 with the logging backend of its line
// (ZooKeeper-mode releases up to 3.9.x; 4.x, KRaft only, with the newest
// tested 4.x's log4j2).
func ReleaseOf(v string) (Release, error) {
	for _, r := range Releases {
		if r.Version == v {
			return r, nil
		}
	}
	ver, err := kafkaver.Parse(v)
	if err != nil || ver.Patch < 0 {
		return Release{}, fmt.Errorf("--kafka-version %q: expected a Kafka release such as %s", v, KafkaVersion)
	}
	if err := runnable(ver); err != nil {
		return Release{}, err
	}
	r := Release{Version: v, Logging: reload4j, Modes: ModesOf(ver)}
	switch {
	case ver.AtLeast(4, 0):
		r.Logging = Releases[len(Releases)-1].Logging
	case !ver.AtLeast(3, 1):
		r.Logging = log4j12("1.7.30")
	}
	return r, nil
}

// runnable says why release v cannot be a kremedy lab at all: before 2.4
// (kafkaver.Runnable: a ZooKeeper 3.4 client that cannot resolve addresses
// on Java 14 and later). A 4.x release runs, in KRaft mode only.
func runnable(v kafkaver.Version) error {
	if v.AtLeast(4, 0) {
		return nil
	}
	return v.Runnable()
}

// checkMode refuses to run release v in the lab mode asked for.
func checkMode(v kafkaver.Version, kraft bool) error {
	m := ModesOf(v)
	switch {
	case kraft && !m.Has(KRaftMode):
		return fmt.Errorf("--kraft with Kafka %s: the KRaft lab runs 3.7 and later (3.7 marks a recreated topic's old logs stray and answers DescribeQuorum on the controller listener); use --kafka-version %s or %s", v, KafkaVersion, NewestKafka)
	case !kraft && !m.Has(ZooKeeperMode):
		return fmt.Errorf("Kafka %s: Kafka 4.x has no ZooKeeper mode: add --kraft (`kremedy lab up --kraft --kafka-version %s`)", v, v)
	}
	return nil
}

// DefaultKafkaHome is where `kremedy lab install` puts release v's jars.
func DefaultKafkaHome(v string) string { return filepath.Join(CacheDir(), "kafka-"+v) }

// ResolveKafkaHome picks --kafka-home, then --kafka-version's install,
// then $KAFKA_HOME, then the default release's install, and checks it holds
// a Kafka the lab runs (of the version asked for, when one was).
func ResolveKafkaHome(flag, version string) (home, found string, err error) {
	home = flag
	src := "--kafka-home"
	if home == "" && version != "" {
		home, src = DefaultKafkaHome(version), "--kafka-version "+version
	}
	if home == "" {
		home, src = os.Getenv("KAFKA_HOME"), "KAFKA_HOME"
	}
	if home == "" {
		home, src = DefaultKafkaHome(KafkaVersion), "the kremedy cache"
	}
	found, err = CheckKafkaHome(home)
	if err != nil {
		hint := ""
		if src != "--kafka-home" && src != "KAFKA_HOME" {
			v := version
			if v == "" {
				v = KafkaVersion
			}
			hint = fmt.Sprintf(" (install it with `kremedy lab install --kafka-version %s`)", v)
		}
		return "", "", fmt.Errorf("Kafka home from %s: %w%s", src, err, hint)
	}
	if version != "" && found != version {
		return "", "", fmt.Errorf("%w: --kafka-version %s, but %s (from %s) holds Kafka %s. Nothing was started", ErrMissingPart, version, home, src, found)
	}
	abs, _ := filepath.Abs(home)
	return abs, found, nil
}

var kafkaJar = regexp.MustCompile(`^kafka_2\.1[23]-(\d+\.\d+\.\d+)\.jar$`)

// CheckKafkaHome verifies HOME/libs holds the broker jar of a release this
// machine can run, its logging backend and, for a release with ZooKeeper
// mode (before 4.0), ZooKeeper; and returns the Kafka version. Which mode
// the release may run in is checked when a lab is made (checkMode).
func CheckKafkaHome(home string) (string, error) {
	libs := filepath.Join(home, "libs")
	ents, err := os.ReadDir(libs)
	if err != nil {
		return "", fmt.Errorf("%w: no Kafka jars at %s (%v). Run `kremedy lab install` (or `make lab-install`), or pass --kafka-home with an Apache Kafka 2.4–4.x distribution", ErrMissingPart, libs, err)
	}
	var version string
	var zk, log4j, log4j2, binding bool
	for _, e := range ents {
		n := e.Name()
		if m := kafkaJar.FindStringSubmatch(n); m != nil {
			version = m[1]
			v, _ := kafkaver.Parse(version)
			if err := runnable(v); err != nil {
				return "", fmt.Errorf("%w: %s holds %v", ErrMissingPart, libs, err)
			}
		}
		zk = zk || strings.HasPrefix(n, "zookeeper-3")
		log4j = log4j || strings.HasPrefix(n, "reload4j-") || strings.HasPrefix(n, "log4j-1")
		log4j2 = log4j2 || strings.HasPrefix(n, "log4j-core-2")
		binding = binding || strings.HasPrefix(n, "log4j-slf4j-impl-2")
	}
	if version == "" {
		return "", fmt.Errorf("%w: %s has no kafka_2.13 (or 2.12) jar. Run `kremedy lab install`, or pass --kafka-home with an Apache Kafka 2.4–4.x distribution", ErrMissingPart, libs)
	}
	v := kafkaver.MustParse(version)
	switch {
	case v.AtLeast(4, 0) && (!log4j2 || !binding):
		return "", fmt.Errorf("%w: %s has no log4j2 backend (log4j-core and log4j-slf4j-impl); Kafka %s would run without logs. Run `kremedy lab install --kafka-version %s`", ErrMissingPart, libs, version, version)
	case v.AtLeast(4, 0):
	case !zk:
		return "", fmt.Errorf("%w: %s has no zookeeper jar", ErrMissingPart, libs)
	case !log4j:
		return "", fmt.Errorf("%w: %s has no log4j backend (log4j 1.2 or reload4j); Kafka would run without logs. Run `kremedy lab install --kafka-version %s`", ErrMissingPart, libs, version)
	}
	return version, nil
}

// usesLog4j2 reports whether Kafka release v logs through log4j2 (4.0 and
// later) rather than log4j 1.x / reload4j.
func usesLog4j2(v kafkaver.Version) bool { return v.AtLeast(4, 0) }

// Install fetches release r of Kafka and its runtime classpath from Maven
// Central into home/libs with Maven, from the pom template embedded in
// kremedy (lab/pom.xml).
func Install(ctx context.Context, r Release, home string, out io.Writer) error {
	if v, err := CheckKafkaHome(home); err == nil {
		if v != r.Version {
			return fmt.Errorf("%w: %s already holds Kafka %s, not %s; nothing was changed. Choose another --kafka-home", ErrMissingPart, home, v, r.Version)
		}
		fmt.Fprintf(out, "Kafka %s is already installed at %s\n", v, home)
		return nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("%w: Maven (mvn) is not on PATH; install it (Debian: apt-get install maven) or pass --kafka-home with an Apache Kafka 2.4–4.x distribution", ErrMissingPart)
	}
	tmp, err := os.MkdirTemp("", "kremedy-pom-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var pom strings.Builder
	if err := template.Must(template.New("pom").Parse(pomTemplate)).Execute(&pom, r); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "pom.xml"), []byte(pom.String()), 0o600); err != nil {
		return err
	}
	libs := filepath.Join(home, "libs")
	if err := os.MkdirAll(libs, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(out, "fetching Kafka %s and its runtime classpath from Maven Central into %s\n", r.Version, libs)
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", filepath.Join(tmp, "pom.xml"),
		"dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+libs)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("maven could not fetch Kafka %s: %w (nothing else was changed; %s may hold a partial download, rerun to resume)", r.Version, err, libs)
	}
	v, err := CheckKafkaHome(home)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Kafka %s installed at %s (%s; logging: %s)\n", v, home, r.Modes, loggingName(r))
	return nil
}

func loggingName(r Release) string {
	var names []string
	for _, a := range r.Logging {
		names = append(names, a.Name+" "+a.Version)
	}
	return strings.Join(names, ", ")
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
		return "", fmt.Errorf("%w: java is not on PATH and JAVA_HOME is unset; Kafka needs Java 11 or 17, 4.x Java 17 (Debian: apt-get install openjdk-17-jre-headless)", ErrMissingPart)
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
