package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

func newLabCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "A local rehearsal cluster (real ZooKeeper and Kafka 2.4–3.9, or KRaft on 3.9 and 4.x, and OpenSSH on loopback) that breaks like the incident",
	}
	cmd.AddCommand(newLabInstallCmd(), newLabUpCmd(), newLabStatusCmd(), newLabDownCmd(), newLabBrokerCmd(), newLabControllerCmd(), newLabBreakCmd(), newLabFillCmd())
	return group(cmd)
}

func addDirFlag(c *cobra.Command, dir *string) {
	c.Flags().StringVar(dir, "dir", lab.DefaultDir(), "lab directory")
}

// labErr maps lab errors to exit codes: missing parts, taken ports and
// conflicting settings are configuration problems (2), the rest failures (1).
func labErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lab.ErrMissingPart), errors.Is(err, lab.ErrPortTaken), errors.Is(err, lab.ErrConfigChanged),
		errors.Is(err, lab.ErrOtherVersion), errors.Is(err, lab.ErrNoLab), errors.Is(err, kafkazk.ErrInvalidTopic),
		errors.Is(err, lab.ErrWrongLab), errors.Is(err, lab.ErrBadConfig):
		return usageErr(err)
	default:
		return failedErr(err)
	}
}

func newLabInstallCmd() *cobra.Command {
	var home string
	var versions []string
	var tested []string
	for _, r := range lab.Releases {
		tested = append(tested, fmt.Sprintf("%s (%s)", r.Version, r.Modes))
	}
	c := &cobra.Command{
		Use:   "install",
		Short: "Fetch Kafka releases and their classpath from Maven Central into the kremedy cache (one directory per release)",
		Long: "Fetch Kafka releases and their classpath from Maven Central into the kremedy cache, one Kafka home per release,\n" +
			"each with the logging backend its tarball ships (log4j 1.2 or reload4j up to 3.9, log4j2 from 4.0) and, up to 3.9,\n" +
			"its own ZooKeeper (4.x has none: it runs KRaft only, `lab up --kraft`). Tested releases: " + strings.Join(tested, ", ") +
			".\nAny other release from 2.4.0 (ZooKeeper mode up to 3.9.x; KRaft from 3.7) is accepted, untested.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return labInstall(cmd, versions, home)
		},
	}
	c.Flags().StringSliceVar(&versions, "kafka-version", []string{lab.KafkaVersion}, "releases to install (comma-separated or repeated), e.g. 2.7.2,2.8.2,3.9.2,4.1.2")
	c.Flags().StringVar(&home, "kafka-home", "", "install into this Kafka home instead (libs/ is filled; default: the cache's kafka-VERSION)")
	return c
}

func newLabUpCmd() *cobra.Command {
	var dir string
	var kraft bool
	cfg := lab.DefaultConfig()
	c := &cobra.Command{
		Use:   "up",
		Short: "Start (or resume) the lab; exit 0 once every broker is registered and a controller elected (with --kraft: the quorum has a leader, every broker is unfenced)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return labUp(cmd, dir, kraft, cfg)
		},
	}
	addDirFlag(c, &dir)
	f := c.Flags()
	f.IntVar(&cfg.Brokers, "brokers", cfg.Brokers, "number of brokers (hosts 127.0.1.N)")
	f.IntVar(&cfg.ZooKeepers, "zookeepers", cfg.ZooKeepers, "ZooKeeper ensemble size (hosts 127.0.2.N)")
	f.StringVar(&cfg.Chroot, "chroot", cfg.Chroot, "ZooKeeper chroot of the Kafka cluster")
	f.IntVar(&cfg.LogDirsPerBroker, "log-dirs-per-broker", cfg.LogDirsPerBroker, "log.dirs entries per broker (JBOD)")
	f.StringVar(&cfg.IBP, "ibp", "", "inter.broker.protocol.version (2.7: no topic IDs, the pre-2.8 behaviour)")
	f.StringVar(&cfg.KafkaVersion, "kafka-version", "", "Kafka release to run, installed with `lab install --kafka-version` (default: --kafka-home, $KAFKA_HOME, then "+lab.KafkaVersion+"); 4.x needs --kraft")
	f.StringVar(&cfg.KafkaHome, "kafka-home", "", "an Apache Kafka 2.4–4.x home (default $KAFKA_HOME, then the `lab install` cache)")
	f.BoolVar(&cfg.Secure, "secure", false, "a secured cluster: SASL_SSL (SCRAM-SHA-512, TLS from a lab CA, JKS and PKCS12 keystores), ZooKeeper SASL with ACLs, brokers run as "+lab.ServiceUser+", SSH as "+lab.OperatorUser+" with sudo (needs root and `make lab-users`). With --kraft: StandardAuthorizer with ACLs, the controllers' listener on SASL_SSL with PLAIN, SCRAM users created at format time")
	f.BoolVar(&cfg.Kerberos, "kerberos", false, "with --secure: Kerberized, as vendor distributions set clusters up: a local MIT KDC (realm "+lab.Realm+", krb5-kdc), brokers on SASL_SSL with GSSAPI between themselves and for kremedy (a keytab), SCRAM-SHA-512 beside it")
	f.IntVar(&cfg.KRaftControllers, "kraft-controllers", 0, "provision a KRaft controller quorum of this many (1, 3 or 5) for the ZooKeeper → KRaft migration: own hosts 127.NET.3.K with sshd, formatted with the cluster's id, not started (the zk-to-kraft runbook starts them); the brokers' server.properties are then written once and left to the runbook. With --kraft: the cluster's quorum (default 3)")
	f.BoolVar(&cfg.Tiered, "tiered", false, "with --kraft on Kafka 4.x: tiered storage (KIP-405) on, Kafka's own LocalTieredStorage (from its kafka-storage test jar, fetched from Maven Central) keeping the remote copies in the lab directory's remote-storage/; a topic opts in with remote.storage.enable=true")
	f.BoolVar(&cfg.Combined, "combined", false, "with --kraft: combined nodes (process.roles=broker,controller): the --brokers brokers (an odd number) are the quorum's voters, their controller listener on 127.NET.1.N:9093, listed in the inventory as brokers and as kraft_controllers; no controller of its own")
	f.StringVar(&cfg.KRaftQuorum, "kraft-quorum", "", "with --kraft: the quorum's kind, static (every node lists controller.quorum.voters; the default) or dynamic (KIP-853, Kafka 3.9+: the controllers formatted with --initial-controllers and found through controller.quorum.bootstrap.servers; the voter set lives in the metadata log)")
	f.BoolVar(&kraft, "kraft", false, "a KRaft-only cluster (Kafka 3.7+, the only mode of 4.x): --kraft-controllers controllers (node.id 3001…, hosts 127.NET.3.K with sshd) and --brokers brokers in KRaft mode, every node formatted with kafka-storage, no ZooKeeper")
	f.StringVar(&cfg.BrokerHeap, "broker-heap", "", "each broker's Java heap, such as 2g (default 512m): a lab filled with thousands of partitions per broker (lab fill) needs more")
	f.StringVar(&cfg.ZKHeap, "zk-heap", "", "each ZooKeeper node's Java heap, such as 2g (default 128m): a ZooKeeper holding hundreds of thousands of partitions needs one sized like a production ensemble's")
	f.IntVar(&cfg.Racks, "racks", 0, "spread the brokers over this many broker.rack values (broker N in rack-((N-1) % R + 1)); Kafka then places new topics' replicas rack-aware. 0: no racks")
	f.StringVar(&cfg.LogDirSize, "log-dir-size", "", "make each broker log dir a tmpfs of this size, such as 64m (root only; `lab down` unmounts it, its data with it): scenario disk-full fills one until ENOSPC")
	f.IntVar(&cfg.Net, "net", 0, "second octet of the lab's loopback addresses (127.NET.1.N), to run a second lab beside the first")
	return c
}

// kraftFlags turns the flags of `lab up --kraft` into a KRaft lab's config,
// refusing the ones a KRaft lab has no use for.
func kraftFlags(changed func(string) bool, cfg *lab.Config) error {
	for _, f := range []struct{ flag, why string }{
		{"zookeepers", "a KRaft lab runs no ZooKeeper"},
		{"chroot", "a KRaft lab has no ZooKeeper to chroot"},
		{"ibp", "a KRaft cluster has metadata.version, not inter.broker.protocol.version"},
	} {
		if changed(f.flag) {
			return fmt.Errorf("--kraft with --%s: %s; leave --%s out", f.flag, f.why, f.flag)
		}
	}
	k := lab.KRaftConfig()
	cfg.KRaft, cfg.ZooKeepers, cfg.Chroot = true, 0, ""
	switch {
	case cfg.Combined && changed("kraft-controllers"):
		return fmt.Errorf("--combined with --kraft-controllers: the combined brokers are the quorum; leave --kraft-controllers out")
	case cfg.Combined:
		cfg.KRaftControllers = 0
	case !changed("kraft-controllers"):
		cfg.KRaftControllers = k.KRaftControllers
	}
	return nil
}

func openLab(dir string) (*lab.Lab, error) {
	l, err := lab.Open(dir)
	return l, labErr(err)
}

func newLabStatusCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "status",
		Short: "Show every lab process, its address and registration (exit 1 when something is down)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return labStatus(cmd, dir)
		},
	}
	addDirFlag(c, &dir)
	return c
}

func newLabDownCmd() *cobra.Command {
	var dir string
	var purge bool
	c := &cobra.Command{
		Use:   "down",
		Short: "Stop everything the lab started (no orphan JVMs); --purge also removes its directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return labErr(lab.Down(cmd.Context(), dir, purge, cmd.OutOrStdout()))
		},
	}
	addDirFlag(c, &dir)
	c.Flags().BoolVar(&purge, "purge", false, "also delete the lab directory (data, keys, logs)")
	return c
}

func newLabBrokerCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:       "broker stop|start ID",
		Short:     "Run one broker's stop or start command over SSH, as an operator would",
		Args:      cobra.ExactArgs(2),
		ValidArgs: []string{"stop", "start"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return labBrokerCmd(cmd, dir, args)
		},
	}
	addDirFlag(c, &dir)
	return c
}

func newLabControllerCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:       "controller stop|start|wipe ID",
		Short:     "Run one KRaft controller's stop or start command over SSH, as an operator would, or wipe it (stopped, its metadata dir removed: a lost disk; lab up then refuses it) (ID: its node.id 3001… or its number 1…)",
		Args:      cobra.ExactArgs(2),
		ValidArgs: []string{"stop", "start", "wipe"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return labController(cmd, dir, args)
		},
	}
	addDirFlag(c, &dir)
	return c
}

func newLabBreakCmd() *cobra.Command {
	var dir, topic string
	c := &cobra.Command{
		Use:               "break SCENARIO",
		Short:             "Break the lab like the incident: " + scenarioNames(),
		Long:              "Break the lab like the incident report. Scenarios:\n" + scenarioHelp(),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeScenarios,
		RunE: func(cmd *cobra.Command, args []string) error {
			return labBreak(cmd, dir, args[0], topic)
		},
	}
	addDirFlag(c, &dir)
	c.Flags().StringVar(&topic, "topic", "orders", "the topic to break")
	return c
}

func newLabFillCmd() *cobra.Command {
	var dir string
	var topics, partitions, rf int
	c := &cobra.Command{
		Use:   "fill",
		Short: "Give a running lab real partitions at scale: topics fill-00000… created through Kafka, served by every broker (for diagnosing and rolling a big cluster)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return labFill(cmd, dir, topics, partitions, rf)
		},
	}
	addDirFlag(c, &dir)
	c.Flags().IntVar(&topics, "topics", 1000, "how many topics (1 to 20000)")
	c.Flags().IntVar(&partitions, "partitions", 10, "partitions of each topic (1 to 1000)")
	c.Flags().IntVar(&rf, "replication-factor", 3, "replication factor of each topic (at most the lab's brokers)")
	return c
}

func scenarioNames() string {
	s := ""
	for i, n := range lab.ScenarioOrder {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// scenarioMode names the kind of lab a scenario breaks.
func scenarioMode(sc lab.Scenario) string {
	if sc.Mode == lab.KRaftMode {
		return "KRaft"
	}
	return "ZooKeeper"
}

func scenarioHelp() string {
	s := ""
	for _, n := range lab.ScenarioOrder {
		sc := lab.Scenarios[n]
		s += fmt.Sprintf("  %-26s [%s labs] %s\n", n, scenarioMode(sc), sc.Summary)
	}
	return s
}

// stopOrStart is the action of `lab broker` and `lab controller`.
func stopOrStart(a string) (string, error) {
	if a != "stop" && a != "start" {
		return "", usageErr(fmt.Errorf("unknown action %q: use stop or start", a))
	}
	return a, nil
}

// labFill is `lab fill`: topics × partitions real partitions in the lab in dir, within 30 minutes.
func labFill(cmd *cobra.Command, dir string, topics, partitions, rf int) error {
	l, err := openLab(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Minute)
	defer cancel()
	return labErr(lab.Fill(ctx, l, topics, partitions, rf, cmd.OutOrStdout()))
}

// labBreak is `lab break`: runs scenario on topic in the lab in dir and prints its report.
func labBreak(cmd *cobra.Command, dir, scenario, topic string) error {
	sc, ok := lab.Scenarios[scenario]
	if !ok {
		return usageErr(fmt.Errorf("unknown scenario %q; known: %s", scenario, scenarioNames()))
	}
	if err := kafkazk.ValidateTopic(topic); err != nil {
		return usageErr(err)
	}
	l, err := openLab(dir)
	if err != nil {
		return err
	}
	rep, err := sc.Run(cmd.Context(), l, topic, cmd.OutOrStdout())
	if rep != nil {
		rep.Print(cmd.OutOrStdout())
	}
	return labErr(err)
}

// labController is `lab controller stop|start|wipe ID`: one KRaft controller's command over SSH, or its disk lost.
func labController(cmd *cobra.Command, dir string, args []string) error {
	action := args[0]
	if action != "stop" && action != "start" && action != "wipe" {
		return usageErr(fmt.Errorf("unknown action %q: use stop, start or wipe", action))
	}
	l, err := openLab(dir)
	if err != nil {
		return err
	}
	k, err := l.ControllerNumber(args[1])
	if err != nil {
		return labErr(err)
	}
	out := func(s string) { fmt.Fprintln(cmd.OutOrStdout(), s) }
	if action == "wipe" {
		return labErr(l.WipeController(cmd.Context(), k, out))
	}
	return labErr(l.ControllerCommand(cmd.Context(), k, action, out))
}

// labBrokerCmd is `lab broker stop|start ID`: one broker's command over SSH.
func labBrokerCmd(cmd *cobra.Command, dir string, args []string) error {
	action, err := stopOrStart(args[0])
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(args[1], 10, 32)
	if err != nil {
		return usageErr(fmt.Errorf("broker id %q is not a number", args[1]))
	}
	l, err := openLab(dir)
	if err != nil {
		return err
	}
	err = l.BrokerCommand(cmd.Context(), int32(id), action, func(s string) { fmt.Fprintln(cmd.OutOrStdout(), s) })
	return labErr(err)
}

// labStatus is `lab status`: every lab process, exit 1 when one is down.
func labStatus(cmd *cobra.Command, dir string) error {
	l, err := openLab(dir)
	if err != nil {
		return err
	}
	st := l.Status(cmd.Context())
	l.Print(cmd.OutOrStdout(), st)
	if !st.Healthy {
		return &exitError{exitFailed, fmt.Errorf("lab %s is not fully up (see DOWN above)", l.Dir)}
	}
	return nil
}

// labUp is `lab up`: starts (or resumes) the lab in dir as cfg says; --kraft's flags checked first.
func labUp(cmd *cobra.Command, dir string, kraft bool, cfg lab.Config) error {
	changed := cmd.Flags().Changed
	if cfg.Combined && !kraft {
		return usageErr(fmt.Errorf("--combined without --kraft: combined nodes are a KRaft cluster's; add --kraft"))
	}
	if kraft {
		if err := kraftFlags(changed, &cfg); err != nil {
			return usageErr(err)
		}
	} else if changed("kraft-quorum") {
		return usageErr(fmt.Errorf("--kraft-quorum %s without --kraft: only a KRaft lab has a quorum of its own (a ZooKeeper lab's migration controllers are static); add --kraft", cfg.KRaftQuorum))
	}
	_, err := lab.Up(cmd.Context(), dir, cfg, changed, cmd.OutOrStdout())
	return labErr(err)
}

// labInstall is `lab install`: each release into the cache, or one into home.
func labInstall(cmd *cobra.Command, versions []string, home string) error {
	if home != "" && len(versions) > 1 {
		return usageErr(fmt.Errorf("--kafka-home names one directory; install one --kafka-version into it"))
	}
	for _, v := range versions {
		r, err := lab.ReleaseOf(v)
		if err != nil {
			return usageErr(err)
		}
		h := home
		if h == "" {
			h = lab.DefaultKafkaHome(v)
		}
		if err := lab.Install(cmd.Context(), r, h, cmd.OutOrStdout()); err != nil {
			return labErr(err)
		}
	}
	return nil
}
