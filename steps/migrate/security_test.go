package migrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A secured ZooKeeper-mode broker and controller as the secured lab writes
// them (SASL_SSL everywhere, SCRAM between brokers, PLAIN at the
// controllers, ZooKeeper SASL ACLs, AclAuthorizer).
const (
	securedBroker = `broker.id=1
listeners=SASL_SSL://b1:9092
security.inter.broker.protocol=SASL_SSL
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="a";
ssl.truststore.location=/etc/kafka/truststore.jks
zookeeper.connect=zk:2181/kafka
zookeeper.set.acl=true
authorizer.class.name=kafka.security.authorizer.AclAuthorizer
super.users=User:admin
`
	securedController = `process.roles=controller
node.id=3001
controller.quorum.voters=3001@c1:9093
controller.listener.names=CONTROLLER
listeners=CONTROLLER://c1:9093
listener.security.protocol.map=CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL
listener.name.controller.sasl.enabled.mechanisms=PLAIN
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" password="c" user_controller="c" user_admin="x";
inter.broker.listener.name=SASL_SSL
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="a";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:controller
zookeeper.metadata.migration.enable=true
zookeeper.connect=zk:2181/kafka
zookeeper.set.acl=true
`
	settingsText = `sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="x";
`
)

func writeSettings(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "controller-settings.properties")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckSecurity: what a secured cluster's migration needs of the
// brokers' and the controllers' configs, each rule once broken.
func TestCheckSecurity(t *testing.T) {
	set, err := ReadControllerSettings(writeSettings(t, settingsText), "CONTROLLER")
	if err != nil {
		t.Fatal(err)
	}
	without := func(text, key string) string {
		var out []string
		for l := range strings.SplitSeq(text, "\n") {
			if !strings.HasPrefix(l, key+"=") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	replace := func(text, from, to string) string {
		if !strings.Contains(text, from) {
			t.Fatalf("%q not in the config", from)
		}
		return strings.Replace(text, from, to, 1)
	}
	for _, tc := range []struct {
		name         string
		broker, ctrl string
		set          ControllerSettings
		want         string // a problem's words; "" none
		fact         string
	}{
		{name: "secured alike, with the brokers' login", broker: securedBroker, ctrl: securedController, set: set,
			fact: "the controllers' CONTROLLER listener: SASL_SSL with PLAIN"},
		{name: "no login for the brokers", broker: securedBroker, ctrl: securedController,
			want: "brokers 1 have no listener.name.controller.gssapi.sasl.jaas.config"},
		{name: "a mechanism the controllers do not enable", broker: securedBroker, ctrl: replace(securedController, "sasl.enabled.mechanisms=PLAIN", "sasl.enabled.mechanisms=SCRAM-SHA-512"), set: set,
			want: "would log in to the controllers with PLAIN"},
		{name: "controller without ZooKeeper ACLs", broker: securedBroker, ctrl: without(securedController, "zookeeper.set.acl"), set: set,
			want: "controller 3001 lacks zookeeper.set.acl=true"},
		{name: "controller without an authorizer", broker: securedBroker, ctrl: without(securedController, "authorizer.class.name"), set: set,
			want: "controller 3001 has no authorizer.class.name"},
		{name: "controller without super users", broker: securedBroker, ctrl: without(securedController, "super.users"), set: set,
			want: "controller 3001 has no super.users"},
		{name: "controller without the inter-broker login", broker: securedBroker, ctrl: without(securedController, "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"), set: set,
			want: "controller 3001 has no listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"},
		{name: "controller on another inter-broker listener", broker: securedBroker, ctrl: replace(securedController, "inter.broker.listener.name=SASL_SSL", "inter.broker.listener.name=PLAINTEXT"), set: set,
			want: "controller 3001's inter-broker listener is PLAINTEXT, the brokers' is SASL_SSL"},
		{name: "a KRaft controller without the map serves its listener PLAINTEXT, as Kafka maps it", broker: securedBroker, ctrl: without(securedController, "listener.security.protocol.map"),
			fact: "CAUTION: the brokers' inter-broker listener is SASL_SSL but the controllers' listener is PLAINTEXT"},
		{name: "controller listener missing from the map", broker: securedBroker, ctrl: replace(securedController, "CONTROLLER:SASL_SSL,", ""),
			want: "has no CONTROLLER entry"},
		{name: "controller with AclAuthorizer", broker: securedBroker, ctrl: replace(securedController, "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"), set: set,
			want: "which keeps its ACLs in ZooKeeper"},
		{name: "the brokers' principal not a super user at the controllers", broker: securedBroker, ctrl: replace(securedController, "super.users=User:admin;User:controller", "super.users=User:controller"), set: set,
			want: "lacks User:admin, the principal the brokers log in to the controllers as"},
		{name: "the controller's inter-broker mechanism not enabled on the brokers", broker: securedBroker, ctrl: replace(securedController, "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol=PLAIN"), set: set,
			want: "would log in to the brokers' SASL_SSL listener with PLAIN"},
		{name: "logins in static JAAS files", broker: securedBroker, ctrl: without(securedController, "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"), set: ControllerSettings{Set: [][2]string{{"sasl.mechanism.controller.protocol", "PLAIN"}}, StaticJAAS: true},
			fact: "static_jaas=true"},
		{name: "SCRAM at the controllers is a caution", broker: securedBroker, ctrl: replace(securedController, "sasl.enabled.mechanisms=PLAIN", "sasl.enabled.mechanisms=SCRAM-SHA-512"),
			set:  ControllerSettings{Set: [][2]string{{"sasl.mechanism.controller.protocol", "SCRAM-SHA-512"}, {"listener.name.controller.scram-sha-512.sasl.jaas.config", `org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="x";`}}},
			fact: "kafka-storage format --add-scram"},
		{name: "a broker mapping the listener otherwise", broker: securedBroker + "listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SSL\n", ctrl: securedController, set: set,
			want: "brokers 1 map CONTROLLER to SSL"},
		{name: "a plaintext controller listener on a secured cluster is a caution", broker: securedBroker,
			ctrl: replace(securedController, "CONTROLLER:SASL_SSL", "CONTROLLER:PLAINTEXT"), fact: "CAUTION: the brokers' inter-broker listener is SASL_SSL but the controllers' listener is PLAINTEXT"},
		{name: "a plaintext cluster needs nothing", broker: "broker.id=1\nzookeeper.connect=zk:2181/kafka\n",
			ctrl: "process.roles=controller\ncontroller.listener.names=CONTROLLER\nlistener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\ninter.broker.listener.name=PLAINTEXT\nzookeeper.metadata.migration.enable=true\n",
			fact: "CONTROLLER listener: PLAINTEXT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec := CheckSecurity(map[int32]*Props{1: mustProps(t, tc.broker)}, map[int32]*Props{3001: mustProps(t, tc.ctrl)}, "CONTROLLER", tc.set)
			all := strings.Join(sec.Problems, "\n")
			switch {
			case tc.want == "" && len(sec.Problems) > 0:
				t.Fatalf("problems: %s", all)
			case tc.want != "" && !strings.Contains(all, tc.want):
				t.Fatalf("problems %q, want one saying %q", all, tc.want)
			}
			if tc.fact != "" && !strings.Contains(strings.Join(sec.Facts, "\n"), tc.fact) {
				t.Fatalf("facts %q, want %q", sec.Facts, tc.fact)
			}
		})
	}
}

// TestMigrationEditWritesTheLogin: the brokers' login at the controllers is
// in the migration edit, escaped so Java reads it back as written.
func TestMigrationEditWritesTheLogin(t *testing.T) {
	set, err := ReadControllerSettings(writeSettings(t, settingsText+`listener.name.controller.ssl.truststore.password=back\slash`+"\n"), "CONTROLLER")
	if err != nil {
		t.Fatal(err)
	}
	q := quorum
	q.Listener, q.Protocol, q.Settings = "CONTROLLER", "SASL_SSL", set.Set
	text, _ := edit(t, securedBroker, func(p *Props) (Edit, error) { return MigrationEdit(p, q) })
	p := mustProps(t, text)
	for _, kv := range set.Set {
		if got, _ := p.Get(kv[0]); got != kv[1] {
			t.Fatalf("%s reads back as %q, want %q:\n%s", kv[0], got, kv[1], text)
		}
	}
	if pm, _ := p.Get(keyProtoMap); !strings.Contains(pm, "CONTROLLER:SASL_SSL") {
		t.Fatalf("protocol map %q", pm)
	}
}

// TestReadControllerSettings refuses what does not belong there, naming
// the line, and a relative path.
func TestReadControllerSettings(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{settingsText + "# a comment\nsasl.jaas.config=x\n", "line 4: sasl.jaas.config"},
		{"ssl.keystore.password=x\n", "only sasl.mechanism.controller.protocol and listener.name.controller.*"},
		{"# nothing\n", "sets nothing"},
		{"a=\\u00zz\n", "malformed"},
	} {
		if _, err := ReadControllerSettings(writeSettings(t, tc.text), "CONTROLLER"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
	if _, err := ReadControllerSettings("settings.properties", "CONTROLLER"); err == nil || !strings.Contains(err.Error(), "absolute path") {
		t.Fatalf("a relative path: %v", err)
	}
}

// TestMaskLine: the plan's diff lines show no secret: every key that
// names one (any listener's prefix too), whatever its separator, JAAS
// options, PEM private keys, commented-out lines; what is no secret stays
// readable.
func TestMaskLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`ssl.keystore.password=s3cret`, `ssl.keystore.password=****`},
		{`ssl.key.password = s3cret`, `ssl.key.password = ****`},
		{`ssl.truststore.password: s3cret`, `ssl.truststore.password: ****`},
		{`ssl.keystore.password s3cret`, `ssl.keystore.password ****`},
		{`listener.name.internal.ssl.keystore.password=s3cret`, `listener.name.internal.ssl.keystore.password=****`},
		{`zookeeper.ssl.keystore.password=s3cret`, `zookeeper.ssl.keystore.password=****`},
		{`ssl.keystore.key=-----BEGIN ENCRYPTED PRIVATE KEY----- MIIE -----END ENCRYPTED PRIVATE KEY-----`, `ssl.keystore.key=****`},
		{`listener.name.controller.ssl.keystore.key=MIIE`, `listener.name.controller.ssl.keystore.key=****`},
		{`ssl.truststore.certificates=-----BEGIN CERTIFICATE----- MIIC -----END CERTIFICATE-----`, `ssl.truststore.certificates=****`},
		{`password.encoder.secret=s3cret`, `password.encoder.secret=****`},
		{`password.encoder.old.secret=s3cret`, `password.encoder.old.secret=****`},
		{`delegation.token.secret.key=s3cret`, `delegation.token.secret.key=****`},
		{`delegation.token.master.key=s3cret`, `delegation.token.master.key=****`},
		{`sasl.oauthbearer.client.credentials.client.secret=s3cret`, `sasl.oauthbearer.client.credentials.client.secret=****`},
		{`sasl.oauthbearer.assertion.private.key.passphrase=s3cret`, `sasl.oauthbearer.assertion.private.key.passphrase=****`},
		{`ssl.keystore.password=${file:/etc/kafka/secrets.properties:store}`, `ssl.keystore.password=****`},
		// A certificate chain is public: masked only when a private key is in it.
		{`ssl.keystore.certificate.chain=-----BEGIN CERTIFICATE----- MIIC -----END CERTIFICATE-----`, `ssl.keystore.certificate.chain=-----BEGIN CERTIFICATE----- MIIC -----END CERTIFICATE-----`},
		{`ssl.keystore.certificate.chain=-----BEGIN PRIVATE KEY----- MIIE -----END PRIVATE KEY----- -----BEGIN CERTIFICATE----- MIIC`, `ssl.keystore.certificate.chain=****`},
		{`listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="x" user_admin="y";`,
			`listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="****" user_admin="****";`},
		{`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=admin password=bare;`,
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=admin password="****";`},
		{`listener.name.x.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="kafka" clientSecret="s3cret" scope="a";`,
			`listener.name.x.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="kafka" clientSecret="****" scope="a";`},
		{`sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/etc/kafka/k.keytab" principal="kafka/b1@EXAMPLE.COM";`,
			`sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/etc/kafka/k.keytab" principal="kafka/b1@EXAMPLE.COM";`},
		{`# password=comment`, `# password=****`},
		{`#ssl.keystore.password=old`, `#ssl.keystore.password=****`},
		{`zookeeper.connect=zk:2181/kafka`, `zookeeper.connect=zk:2181/kafka`},
		{`ssl.keystore.location=/etc/kafka/keystore.jks`, `ssl.keystore.location=/etc/kafka/keystore.jks`},
		{`sasl.oauthbearer.client.credentials.client.id=kafka`, `sasl.oauthbearer.client.credentials.client.id=kafka`},
		{`ssl.keystore.password=`, `ssl.keystore.password=`},
		{`# a comment`, `# a comment`},
	} {
		if got := maskLine(tc.in); got != tc.want {
			t.Errorf("maskLine(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// TestDiffTextMasksContinuedLines: a value continued over several lines
// is one entry of the diff, masked as a whole.
func TestDiffTextMasksContinuedLines(t *testing.T) {
	from := "broker.id=1\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username=\"admin\" \\\n    password=\"s3cret\";\nssl.keystore.password=\\\n  s3cret2\n"
	to := "broker.id=1\nprocess.roles=broker\n"
	got := diffText(from, to)
	for _, s := range []string{"s3cret", "s3cret2"} {
		if strings.Contains(got, s) {
			t.Fatalf("diff shows %s: %s", s, got)
		}
	}
	for _, w := range []string{`username="admin" password="****";`, "- ssl.keystore.password=****", "+ process.roles=broker"} {
		if !strings.Contains(got, w) {
			t.Fatalf("diff lacks %q: %s", w, got)
		}
	}
}
