package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/drill"
	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/inventory/connect"
	"github.com/kremedy/kremedy/inventory/live"
)

func newInventoryCmd() *cobra.Command {
	c := group(&cobra.Command{
		Use:   "inventory",
		Short: "Write an inventory from a live cluster (init), or prove one reaches every part (check)",
	})
	c.AddCommand(newInventoryInitCmd(), newInventoryCheckCmd())
	return c
}

func newInventoryInitCmd() *cobra.Command {
	var (
		o                   live.Options
		zkConnect, zkUser   string
		zkPasswordFile, out string
		force               bool
	)
	c := &cobra.Command{
		Use:   "init (--zookeeper CONNECT [--bootstrap B,…] | --bootstrap B,…) [--client-properties F] [--ssh-user U] [-o FILE]",
		Short: "Write an inventory from the live cluster: brokers from ZooKeeper (or, for a KRaft cluster, from Kafka and its controllers), log.dirs from Kafka, stop/start guessed over SSH (to review)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return inventoryInit(cmd, o, initFlags{zkConnect, zkUser, zkPasswordFile, out, force})
		},
	}
	f := c.Flags()
	f.StringVar(&zkConnect, "zookeeper", "", "a ZooKeeper-mode cluster: the brokers' zookeeper.connect, chroot included (host:2181,host2:2181/kafka)")
	f.StringSliceVar(&o.Bootstrap, "bootstrap", nil, "bootstrap servers (with --zookeeper, default: every broker's listener that speaks the client properties' security.protocol); without --zookeeper the cluster is read as a KRaft cluster through them")
	f.StringVar(&o.ClientProperties, "client-properties", "", "a Kafka client.properties for TLS/SASL (JKS, PKCS12 or PEM stores; config providers; GSSAPI with a keytab or ticket cache)")
	f.StringVar(&o.ControllerClientProperties, "controller-client-properties", "", "a KRaft cluster's: the client.properties kremedy reaches the controllers' own listener with, when it takes other credentials than the brokers' (default: --client-properties)")
	f.StringVar(&o.Krb5Conf, "krb5-conf", "", "with a GSSAPI client.properties: the krb5.conf Kafka's clients use (-Djava.security.krb5.conf; default $KRB5_CONFIG, else /etc/krb5.conf)")
	f.StringVar(&o.SSH.User, "ssh-user", "", "SSH login on the broker hosts (default: ssh config, then your user)")
	f.IntVar(&o.SSH.Port, "ssh-port", 0, "SSH port (default: ssh config, then 22)")
	f.StringVar(&o.SSH.IdentityFile, "identity-file", "", "SSH private key (default: ssh config, ~/.ssh/id_*, the agent)")
	f.StringVar(&o.SSH.KnownHosts, "known-hosts", "~/.ssh/known_hosts", "known_hosts file that holds the broker hosts' keys (kremedy never trusts a key on first use)")
	f.StringVar(&o.SSH.Config, "ssh-config", "", `OpenSSH client config ("" = ssh's own files, "none" = none)`)
	f.StringVar(&o.SSH.Become, "become", "", `"sudo" runs every command on the hosts through sudo -n`)
	f.StringVar(&zkUser, "zookeeper-user", "", "ZooKeeper digest user (a superDigest identity on SASL-ACL'd clusters)")
	f.StringVar(&zkPasswordFile, "zookeeper-password-file", "", "file holding that user's password")
	f.StringVar(&o.Name, "name", "my-cluster", "the cluster's name in the inventory (runbooks may ask to type it)")
	f.StringVarP(&out, "output", "o", "", "write the inventory to FILE (default: stdout)")
	f.BoolVar(&force, "force", false, "replace --output if it exists")
	return c
}

func newInventoryCheckCmd() *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:   "check --inventory F",
		Short: "Validate an inventory offline, then reach every part it names (ZooKeeper with its auth, every broker with its security, every SSH host with sudo); exit 0 when all work",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			actsOn(cmd, drill.Invocation{Inventory: path})
			return inventoryCheck(cmd, path)
		},
	}
	c.Flags().StringVar(&path, "inventory", "", "inventory file")
	_ = c.MarkFlagRequired("inventory")
	return c
}

// inventoryCheck validates the inventory at path offline, then reaches
// every part it names (live.Check) and prints one line per part.
func inventoryCheck(cmd *cobra.Command, path string) error {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	defer w.Flush()
	inv, err := inventory.Load(path)
	if err != nil {
		return usageErr(err)
	}
	fmt.Fprintf(w, "ok\tinventory\t%s: valid, %s mode, %d brokers, %d controllers, %d clients\n", path, cmp.Or(inv.Mode, inventory.ModeZooKeeper), len(inv.Brokers), len(inv.KRaftControllers), len(inv.Clients))
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
	defer cancel()
	cl, err := openInventory(ctx, inv)
	if err != nil {
		fmt.Fprintf(w, "FAIL\tconnect\t%v\n", err)
		return failedErr(errors.New("the inventory does not reach its cluster (see above)"))
	}
	defer cl.Close()
	if !inv.KRaft() {
		fmt.Fprintf(w, "ok\tzookeeper session\t%s%s\n", inv.ZooKeeper.Connect, authNote(inv))
	}
	fmt.Fprintf(w, "ok\tkafka security\t%s\n", orPlain(inv.Kafka.ClientProperties))
	become := map[int32]bool{}
	for _, b := range inv.Brokers {
		become[b.ID] = inv.SSHFor(b).Become == inventory.BecomeSudo
	}
	failed := 0
	for _, r := range live.Check(ctx, cl.Ports, become) {
		mark := "ok"
		if !r.OK {
			mark, failed = "FAIL", failed+1
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", mark, r.Part, r.Detail)
	}
	if failed > 0 {
		w.Flush()
		return failedErr(fmt.Errorf("%d part(s) of the cluster not reached as the inventory says (FAIL above)", failed))
	}
	return nil
}

func authNote(inv *inventory.Inventory) string {
	if a := inv.ZooKeeper.Auth; a != nil {
		return " (digest user " + a.User + ")"
	}
	return " (no auth)"
}

func orPlain(f string) string {
	if f == "" {
		return "PLAINTEXT (no client properties)"
	}
	return f + " accepted by the brokers"
}

// initFlags are inventory init's flags that are not live.Options.
type initFlags struct {
	zkConnect, zkUser, zkPasswordFile, out string
	force                                  bool
}

// inventoryInit reads the live cluster and writes its inventory.
func inventoryInit(cmd *cobra.Command, o live.Options, fl initFlags) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
	defer cancel()
	if fl.zkConnect == "" {
		if len(o.Bootstrap) == 0 {
			return usageErr(errors.New("give --zookeeper CONNECT (a ZooKeeper-mode cluster) or --bootstrap HOST:PORT (a KRaft cluster); nothing was written"))
		}
		if fl.zkUser != "" {
			return usageErr(errors.New("--zookeeper-user without --zookeeper: a KRaft cluster has no ZooKeeper; nothing was written"))
		}
		if err := refuseOverwrite(fl); err != nil {
			return err
		}
		inv, err := connect.InitKRaft(ctx, o)
		if err != nil {
			return connectErr(err)
		}
		return writeInit(cmd, inv, fl)
	}
	if o.ControllerClientProperties != "" {
		return usageErr(errors.New("--controller-client-properties with --zookeeper: a ZooKeeper-mode cluster's controllers (a migration's) are listed by hand in kraft_controllers, and their client properties with them (kafka.controller_client_properties); nothing was written"))
	}
	o.ZooKeeper.Connect = fl.zkConnect
	if err := initZKAuth(&o, fl); err != nil {
		return err
	}
	zopts, _, err := connect.ZooKeeperOptions(o.ZooKeeper, nil)
	if err != nil {
		return connectErr(err)
	}
	if err := refuseOverwrite(fl); err != nil {
		return err
	}
	inv, err := connect.Init(ctx, o, zopts)
	if err != nil {
		return connectErr(err)
	}
	return writeInit(cmd, inv, fl)
}

// refuseOverwrite refuses an --output that exists, without --force.
func refuseOverwrite(fl initFlags) error {
	if fl.out != "" && !fl.force {
		if _, err := os.Stat(fl.out); err == nil {
			return usageErr(fmt.Errorf("%s exists; nothing was written (--force replaces it)", fl.out))
		}
	}
	return nil
}

// writeInit checks an inventory init wrote and puts it out.
func writeInit(cmd *cobra.Command, inv *inventory.Inventory, fl initFlags) error {
	b, err := inv.Marshal()
	if err != nil {
		return failedErr(err)
	}
	if _, err := inventory.Parse("(written)", b); err != nil {
		// Say what the operator must add (known_hosts, say) rather
		// than write a file kremedy itself refuses.
		return usageErr(fmt.Errorf("the inventory read from the cluster does not validate yet: %w; nothing was written", err))
	}
	for _, n := range strings.Split(inv.Note, "\n") {
		fmt.Fprintln(cmd.ErrOrStderr(), n)
	}
	if fl.out == "" {
		_, err := cmd.OutOrStdout().Write(b)
		return err
	}
	if err := inventory.Write(fl.out, inv); err != nil {
		return failedErr(err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: review it, then `kremedy inventory check --inventory %s`\n", fl.out, fl.out)
	return nil
}

// initZKAuth sets the inventory's ZooKeeper auth from the flags.
func initZKAuth(o *live.Options, fl initFlags) error {
	if fl.zkUser == "" {
		return nil
	}
	if fl.zkPasswordFile == "" {
		return usageErr(errors.New("--zookeeper-user needs --zookeeper-password-file (passwords never go on the command line)"))
	}
	o.ZooKeeper.Auth = &inventory.ZKAuth{User: fl.zkUser, PasswordFile: fl.zkPasswordFile}
	return nil
}
