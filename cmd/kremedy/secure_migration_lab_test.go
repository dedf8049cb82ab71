package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/inventory/connect"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/migrate"
)

// TestSecureMigrationLab migrates a secured cluster (lab up --secure
// --kraft-controllers 3: SASL_SSL with SCRAM-SHA-512 between brokers and
// for clients, ZooKeeper SASL ACLs, AclAuthorizer with ACLs, controllers on
// SASL_SSL with PLAIN, SSH through sudo) while a SCRAM client with ACLs
// writes with an acks=all idempotent producer: refused without the brokers'
// login at the controllers; into migration mode and back; to dual-write,
// where the controllers' listener refuses PLAINTEXT and a wrong login, and
// back; each revert leaving every server.properties byte-identical and the
// clients authorized; then to finalize. Zero failed sends;
// afterwards the same SCRAM credentials log in, the same ACLs allow and deny
// (the intruder is still denied), every record is readable, the brokers have
// no ZooKeeper setting, and kremedy itself — authorized by its migrated ACLs,
// not a super user — checks and diagnoses the cluster.
func TestSecureMigrationLab(t *testing.T) {
	needSecureLab(t)
	heavyLab(t, "the secured migration lab (about 7 minutes; make test keeps TestZKToKRaftLab for the migration, TestSecureLab, TestKerberosLab and TestSecureKRaftLab for secured clusters)")
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.ZooKeepers, cfg.Secure, cfg.KRaftControllers = 26, 1, true, 3
	l := startSecureLab(t, cfg)
	// What sudo logs from here on (lab/install-users.sh makes it log every
	// command): no secret may be in it when the run is over.
	sudoLogFrom := sudoLogSize(t)
	c := connectLab(t, l)
	inv := l.Inventory().Name
	original := brokerConfigs(t, l)
	runs := t.TempDir()
	// Every kremedy's output (text and --output jsonl) is kept: no secret
	// may be in it either.
	var outputs []string
	kr := func(args ...string) result {
		t.Helper()
		r := kremedy(t, args...)
		outputs = append(outputs, r.out)
		return r
	}
	app, intruder := userOpts(t, l, lab.AppUser), userOpts(t, l, lab.IntruderUser)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const ledgerTopic, probe, opsTopic = lab.AppPrefix + "-ledger", lab.AppPrefix + "-probe", "ops-only"
	for _, tp := range []string{ledgerTopic, probe, opsTopic} {
		if _, err := c.kc.CreateTopic(ctx, tp, nil, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
			t.Fatalf("create %s: %v", tp, err)
		}
	}
	acls := describeACLs(ctx, t, c.kc.Admin())
	// authorized: the ACLs allow and deny as the lab wrote them.
	authorized := func(when string) {
		t.Helper()
		if err := produceOnce(ctx, l, probe, app); err != nil {
			t.Fatalf("%s: %s may not write %s: %v", when, lab.AppUser, probe, err)
		}
		if err := produceOnce(ctx, l, opsTopic, app); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("%s: %s writing %s (no ACL): %v, want TOPIC_AUTHORIZATION_FAILED", when, lab.AppUser, opsTopic, err)
		}
		if err := produceOnce(ctx, l, probe, intruder); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("%s: %s (no ACL at all) writing %s: %v, want TOPIC_AUTHORIZATION_FAILED", when, lab.IntruderUser, probe, err)
		}
	}
	authorized("before the migration")
	if len(acls) == 0 {
		t.Fatal("the secured lab has no ACLs")
	}

	// Without the brokers' login at the controllers' SASL listener the
	// migration is refused before anything changes, naming the way.
	refused := filepath.Join(runs, "refused")
	r := kr("run", "zk-to-kraft", "--inventory", l.InventoryPath(), "--run-dir", refused, "--headless", "--yes", "--confirm", inv)
	if r.code != exitFailed || !strings.Contains(r.out, "listener.name.controller.gssapi.sasl.jaas.config") || !strings.Contains(r.out, "--set controller_settings=") || !strings.Contains(r.out, "Nothing was changed") {
		t.Fatalf("zk-to-kraft without controller_settings: exit %d, want a refusal naming the login and the way\n%s", r.code, r.out)
	}
	assertNoActions(t, refused)
	for k := 1; k <= cfg.KRaftControllers; k++ {
		if l.ControllerPID(k) != 0 {
			t.Fatalf("controller %d was started by a refused run", k)
		}
	}

	stop := make(chan struct{})
	done := produceDuringWith(t, l, ledgerTopic, 3, stop, app...)
	producing := true
	defer func() {
		if producing {
			close(stop)
			done()
		}
	}()
	settings := "controller_settings=" + l.BrokerControllerSettings()
	migrateTo := func(run, stopBefore string) {
		t.Helper()
		args := []string{"run", "zk-to-kraft", "--inventory", l.InventoryPath(), "--set", settings, "--run-dir", run, "--headless", "--output", "jsonl", "--yes", "--confirm", inv}
		if stopBefore != "" {
			args = append(args, "--stop-before", stopBefore)
		}
		r := kr(args...)
		if stopBefore == "" && r.code != 0 || stopBefore != "" && !strings.Contains(r.out, "stopping before "+stopBefore) {
			t.Fatalf("zk-to-kraft on the secured lab: exit %d\n%s", r.code, r.out)
		}
		noRollTwice(t, run)
		phaseTimes(t, "secured zk-to-kraft", run)
	}

	revert := func(run, from string) {
		t.Helper()
		if r := kr("run", "zk-to-kraft-revert", "--inventory", l.InventoryPath(), "--run-dir", run, "--headless", "--yes", "--confirm", inv); r.code != 0 {
			t.Fatalf("zk-to-kraft-revert from %s on the secured lab: exit %d\n%s", from, r.code, r.out)
		}
		noRollTwice(t, run)
		phaseTimes(t, "secured zk-to-kraft-revert from "+from, run)
		// Every server.properties as it was, byte for byte, and the
		// clients still authorized.
		backInZooKeeper(t, l, c, original)
		authorized("after the revert from " + from)
		reformat(t, l)
	}

	// 0. Into migration mode (the metadata migrated), then back.
	migrateTo(filepath.Join(runs, "m0"), "brokers-to-kraft")
	if p := phaseOf(t, l); p != string(migrate.PhaseMigrated) {
		t.Fatalf("after the roll into migration mode the phase is %s", p)
	}
	authorized("in migration mode")
	// The plan of the roll to KRaft as `plan --json` prints it: its edits
	// carry digests, not the new server.properties.
	if r := kr("plan", "zk-to-kraft", "--inventory", l.InventoryPath(), "--set", settings, "--json"); !strings.Contains(r.out, `"to_sha256"`) || !strings.Contains(r.out, `"brokers-to-kraft"`) {
		t.Fatalf("plan --json in migration mode plans no config edit of brokers-to-kraft: exit %d\n%s", r.code, r.out)
	}
	revert(filepath.Join(runs, "r0"), "migration mode")

	// 1. To dual-write.
	migrateTo(filepath.Join(runs, "m1"), "finalize")
	if p := phaseOf(t, l); p != string(migrate.PhaseDualWrite) {
		t.Fatalf("after the roll to KRaft the phase is %s", p)
	}
	for n, cf := range brokerConfigs(t, l) {
		if strings.Contains(cf, "\nzookeeper.") || !strings.Contains(cf, "listener.name.controller.plain.sasl.jaas.config=") || !strings.Contains(cf, "sasl.mechanism.controller.protocol=PLAIN") {
			t.Fatalf("broker %d in dual-write: no login at the controllers, or ZooKeeper settings left:\n%s", n, cf)
		}
	}
	controllerListenerSecured(ctx, t, l)
	// The migrating controller wrote ZooKeeper as the brokers do: its
	// znodes are ACL'd to their SASL identity, and an anonymous session may
	// not delete them.
	acl, err := c.zk.GetACL(ctx, kafkazk.MigrationPath)
	if err != nil || !slices.ContainsFunc(acl, func(a kafkazk.ACL) bool { return a.Scheme == "sasl" && a.ID == "kafka" }) {
		t.Fatalf("%s in dual-write: ACL %+v (%v), want the brokers' SASL identity", kafkazk.MigrationPath, acl, err)
	}
	if r := kr("inventory", "check", "--inventory", l.InventoryPath()); r.code != 0 || !strings.Contains(r.out, "ok  metadata quorum") {
		t.Fatalf("inventory check in dual-write (the controllers reached with kafka.controller_client_properties): exit %d\n%s", r.code, r.out)
	}
	authorized("in dual-write")

	// 2. Back to ZooKeeper from dual-write.
	revert(filepath.Join(runs, "r1"), "dual-write")

	// 3. All the way.
	migrateTo(filepath.Join(runs, "m2"), "")
	close(stop)
	s := done()
	producing = false
	t.Logf("FIGURE secured lab: SCRAM producer (%s, acks=all, idempotent) during migrations to migration mode and to dual-write, their reverts and the migration to finalize: %d acknowledged, %d failed, longest send %s", lab.AppUser, s.acked, s.failed, s.longest)
	if s.failed != 0 {
		t.Fatalf("the producer failed %d sends: %v", s.failed, s.errs)
	}
	if p := phaseOf(t, l); p != string(migrate.PhaseFinalized) {
		t.Fatalf("after finalize the phase is %s", p)
	}
	for n, cf := range brokerConfigs(t, l) {
		if strings.Contains(cf, "\nzookeeper.") || !strings.Contains(cf, "process.roles=broker") || !strings.Contains(cf, "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer") {
			t.Fatalf("broker %d after the migration:\n%s", n, cf)
		}
	}
	// The ACLs came along (read through the KRaft brokers by kremedy's own
	// principal, which they authorize), and allow and deny as before.
	if after := describeACLs(ctx, t, c.kc.Admin()); !slices.Equal(after, acls) {
		t.Fatalf("the ACLs after the migration:\n%s\nbefore:\n%s", strings.Join(after, "\n"), strings.Join(acls, "\n"))
	}
	authorized("after finalize")
	if got := readAllAs(ctx, t, l, ledgerTopic, 3, app); int64(got) != s.acked {
		t.Fatalf("%s read %d records of %s back, %d were acknowledged", lab.AppUser, got, ledgerTopic, s.acked)
	}
	kinv := filepath.Join(runs, "m2", "inventory-kraft.yaml")
	if r := kr("inventory", "check", "--inventory", kinv); r.code != 0 {
		t.Fatalf("inventory check of the secured cluster's KRaft inventory: exit %d\n%s", r.code, r.out)
	}
	if r := kr("diagnose", "--inventory", kinv); r.code != 0 {
		t.Fatalf("diagnose of the secured cluster in KRaft mode: exit %d\n%s", r.code, r.out)
	}
	noSecretLeft(t, l, runs, outputs, sudoLogFrom)
}

// sudoLog is where the lab's sudoers make sudo log every command it runs
// (lab/install-users.sh): COMMAND= with the whole command line.
const sudoLog = "/var/log/kremedy-lab-sudo.log"

// sudoLogSize is how much of the sudo log there is now (0 when none yet).
func sudoLogSize(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(sudoLog)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// noSecretLeft: no password of the lab (secrets.properties, which made
// every store, login and controller setting), plain or in base64, is in
// any file of the runs (journal.jsonl, report.md, approvals/…), in any
// output kremedy printed (--output jsonl and plan --json among them), or in
// what sudo logged on the hosts since from: a config edit's content
// travels on the SSH session's standard input, never in a command line.
// The sudo log must exist and hold this run's config edits, or its grep
// would prove nothing.
func noSecretLeft(t *testing.T, l *lab.Lab, runs string, outputs []string, from int64) {
	t.Helper()
	secrets := labSecrets(t, l)
	leaks := func(where string, b []byte) {
		t.Helper()
		leaksIn(t, secrets, where, b)
	}
	files := leaksUnder(t, secrets, runs)
	if _, err := os.Stat(filepath.Join(runs, "m2", "journal.jsonl")); err != nil || files < 12 {
		t.Fatalf("the runs' files (%d): %v", files, err)
	}
	for i, o := range outputs {
		leaks(fmt.Sprintf("kremedy's output #%d", i), []byte(o))
	}
	f, err := os.Open(sudoLog)
	if err != nil {
		t.Fatalf("%v: the lab's sudoers log every command there (make lab-users); without it nothing proves no secret was in a command line", err)
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	logged, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	edits := 0
	for _, line := range strings.Split(string(logged), "\n") {
		if strings.Contains(line, "COMMAND=") && strings.Contains(line, l.Dir) && strings.Contains(line, ".kremedy-new") {
			edits++
		}
	}
	if edits == 0 {
		t.Fatalf("%s holds no COMMAND= line of this run's config edits (of %d bytes since the test began): sudo did not log them", sudoLog, len(logged))
	}
	t.Logf("no lab password in %d files of the runs, %d outputs, and %d bytes of %s (%d config edits logged)", files, len(outputs), len(logged), sudoLog, edits)
	leaks(sudoLog, logged)
}

// labSecrets are the secured lab's passwords (secrets.properties, which
// made every store, login and controller setting).
func labSecrets(t *testing.T, l *lab.Lab) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(l.Dir, "secrets.properties"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := javaprops.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for k, v := range p.Values {
		if len(v) < 8 {
			t.Fatalf("lab secret %s is %d bytes: too short to look for", k, len(v))
		}
		secrets = append(secrets, v)
	}
	if len(secrets) < 10 {
		t.Fatalf("%d lab secrets in %s, want every password the lab made", len(secrets), l.Dir)
	}
	return secrets
}

// leaksIn fails t when b, read from where, holds a secret, plain or in
// base64.
func leaksIn(t *testing.T, secrets []string, where string, b []byte) {
	t.Helper()
	for _, s := range secrets {
		for _, f := range secretForms(s) {
			if bytes.Contains(b, []byte(f)) {
				t.Errorf("%s holds a lab password (as %q)", where, f)
			}
		}
	}
}

// leaksUnder is leaksIn on every file under root; it returns how many
// files it read.
func leaksUnder(t *testing.T, secrets []string, root string) int {
	t.Helper()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		leaksIn(t, secrets, path, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// secretForms are the ways s shows in text: itself, and base64 of it at
// each of the three offsets it can start at inside a longer text (the
// characters that hold s's bytes only).
func secretForms(s string) []string {
	out := []string{s}
	for k := 0; k < 3; k++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, k), s...))
		from, to := (8*k+5)/6, 8*(k+len(s))/6
		out = append(out, enc[from:to])
	}
	return out
}

// needSecureLab: the secured lab runs its brokers as the service user and
// logs in as the operator; both must exist (make lab-users), as root.
func needSecureLab(t *testing.T) {
	t.Helper()
	needLab(t)
	if u, err := user.Current(); err != nil || u.Uid != "0" {
		t.Fatal("the secured lab runs its brokers as " + lab.ServiceUser + " and needs root (CI runs as root)")
	}
	for _, u := range []string{lab.ServiceUser, lab.OperatorUser, lab.NoSudoUser} {
		if _, err := user.Lookup(u); err != nil {
			t.Fatalf("user %s: %v: run `make lab-users` as root", u, err)
		}
	}
}

func userOpts(t *testing.T, l *lab.Lab, u string) []kgo.Opt {
	t.Helper()
	opts, err := l.UserOpts(u)
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// produceOnce writes one record as the client opts describe
// (non-idempotent: an intruder gets the topic's refusal, not the
// producer id's).
func produceOnce(ctx context.Context, l *lab.Lab, topic string, opts []kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(l.State.Config.Bootstrap()...), kgo.DisableIdempotentWrite(),
		kgo.RecordDeliveryTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	return cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("probe")}).FirstErr()
}

// describeACLs lists every ACL of the cluster, one sorted line each.
func describeACLs(ctx context.Context, t *testing.T, adm *kadm.Client) []string {
	t.Helper()
	res, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().
		Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("describe ACLs: %v", r.Err)
		}
		for _, d := range r.Described {
			out = append(out, fmt.Sprintf("%s %s %s %s %s %s %s", d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readAllAs counts every record of topic, read as the client opts
// describe.
func readAllAs(ctx context.Context, t *testing.T, l *lab.Lab, topic string, parts int32, opts []kgo.Opt) int {
	t.Helper()
	n := 0
	for p := int32(0); p < parts; p++ {
		msgs, err := kafka.ReadPartition(ctx, l.State.Config.Bootstrap(), topic, p, opts...)
		if err != nil {
			t.Fatalf("read %s-%d: %v", topic, p, err)
		}
		n += len(msgs)
	}
	return n
}

// controllerListenerSecured: the controllers' listener answers
// DescribeQuorum to the operator's controller client.properties only —
// not to a PLAINTEXT client, not to a wrong PLAIN password.
func controllerListenerSecured(ctx context.Context, t *testing.T, l *lab.Lab) {
	t.Helper()
	addr := fmt.Sprintf("%s:%d", l.State.Config.ControllerHost(1), lab.ControllerPort)
	ask := func(opts ...kgo.Opt) error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(3 * time.Second)}, opts...)...)
		if err != nil {
			return err
		}
		defer cl.Close()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req := kmsg.NewPtrDescribeQuorumRequest()
		tp := kmsg.NewDescribeQuorumRequestTopic()
		tp.Topic = "__cluster_metadata"
		tp.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		req.Topics = append(req.Topics, tp)
		_, err = cl.SeedBrokers()[0].Request(rctx, req)
		return err
	}
	if err := ask(); err == nil {
		t.Fatalf("a PLAINTEXT client got an answer from the controllers' SASL_SSL listener %s", addr)
	}
	props, err := connect.ReadProperties(l.ControllerClientProperties(), "kafka.controller_client_properties")
	if err != nil {
		t.Fatal(err)
	}
	good, _, err := kafka.Options(props)
	if err != nil {
		t.Fatal(err)
	}
	props["sasl.jaas.config"] = `org.apache.kafka.common.security.plain.PlainLoginModule required username="` + lab.ClientUser + `" password="wrong";`
	bad, _, err := kafka.Options(props)
	if err != nil {
		t.Fatal(err)
	}
	if err := ask(bad...); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong PLAIN password at the controllers' listener: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := ask(good...); err != nil && !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("the operator's controller client.properties at %s: %v", addr, err)
	}
}
