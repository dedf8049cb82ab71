package inventory

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// minimal is the smallest valid inventory. Its line numbers matter to the
// table below: 1 name, 2 zookeeper, 3 connect, 4 kafka, 5 bootstrap, 6 ssh,
// 7 known_hosts, 8 brokers, 9 id, 10 host, 11 stop, 12 start.
const minimal = `name: test
zookeeper:
  connect: zk1:2181/kafka
kafka:
  bootstrap: [b1:9092]
ssh:
  known_hosts: /etc/kremedy/known_hosts
brokers:
  - id: 1
    host: b1
    stop: systemctl stop kafka
    start: systemctl start kafka
`

// edit replaces old, which must occur in minimal, with new.
func edit(old, new string) string {
	if !strings.Contains(minimal, old) {
		panic("edit: " + old + " is not in minimal")
	}
	return strings.Replace(minimal, old, new, 1)
}

type parseCase struct {
	name string
	in   string
	// want holds one entry per expected error, in file order: the exact
	// "file:line:col: " prefix followed by a part of the message.
	want []string
}

var parseCases = []parseCase{
	{name: "minimal", in: minimal},
	{name: "per-broker known_hosts instead of defaults", in: edit("ssh:\n  known_hosts: /etc/kremedy/known_hosts\n",
		"") + "    known_hosts: ~/.ssh/known_hosts\n"},
	{name: "auth with password_file", in: edit("  connect: zk1:2181/kafka\n",
		"  connect: zk1:2181/kafka\n  auth:\n    user: kremedy\n    password_file: zk.pw\n")},
	{name: "empty auth key means no auth", in: edit("  connect: zk1:2181/kafka\n", "  connect: zk1:2181/kafka\n  auth: # none\n")},
	{name: "ipv6 bootstrap and chroot-less connect", in: edit("zk1:2181/kafka", "zk1,zk2:2182") + ""},
	{name: "byte order mark", in: "\ufeff" + minimal},
	{name: "explicit document markers", in: "%YAML 1.2\n---\n" + minimal + "...\n"},
	{name: "numbers as text are kept as written", in: edit("name: test", "name: 0042")},
	{name: "become sudo everywhere and per broker", in: edit("ssh:\n", "ssh:\n  become: sudo\n") + "    become: sudo\n"},
	{name: "become something else", in: edit("ssh:\n", "ssh:\n  become: doas\n"),
		want: []string{`t.yaml:7:11: ssh.become "doas": the one method is sudo`}},

	// Syntax and type errors, reported by the decoder.
	{name: "unknown key", in: edit("    host: b1", "    hots: b1"),
		want: []string{`t.yaml:10:5: unknown key "hots" in brokers[0]; known keys there are become, config, host, id,`}},
	{name: "unknown top-level key", in: "nmae: x\n" + minimal,
		want: []string{`t.yaml:1:1: unknown key "nmae" at the top level`}},
	{name: "wrong type id: one", in: edit("id: 1", "id: one"),
		want: []string{"t.yaml:9:9: brokers[0].id must be a whole number, not text"}},
	{name: "fractional id", in: edit("id: 1", "id: 1.5"),
		want: []string{"t.yaml:9:9: brokers[0].id must be a whole number, not a number"}},
	{name: "negative id", in: edit("id: 1", "id: -1"),
		want: []string{"t.yaml:9:9: brokers[0].id is -1; it must be a broker.id from 0 to 2147483647"}},
	{name: "id beyond int32", in: edit("id: 1", "id: 4294967296"),
		want: []string{"t.yaml:9:9: brokers[0].id is 4294967296"}},
	{name: "port zero", in: edit("    host: b1\n", "    host: b1\n    port: 0\n"),
		want: []string{"t.yaml:11:11: brokers[0].port is 0; it must be a port from 1 to 65535"}},
	{name: "port too large", in: edit("ssh:\n", "ssh:\n  port: 70000\n"),
		want: []string{"t.yaml:7:9: ssh.port is 70000; it must be a port from 1 to 65535"}},
	{name: "lab yes is not a bool", in: "lab: yes\n" + minimal,
		want: []string{"t.yaml:1:6: lab must be true or false, not text"}},
	{name: "timeout without unit", in: edit("ssh:\n", "ssh:\n  connect_timeout: 10\n"),
		want: []string{"t.yaml:7:20: ssh.connect_timeout needs a unit, such as 10s or 1m"}},
	{name: "negative timeout", in: edit("ssh:\n", "ssh:\n  connect_timeout: -5s\n"),
		want: []string{`t.yaml:7:20: ssh.connect_timeout is "-5s"; it must be a positive duration`}},
	{name: "list where text belongs", in: edit("name: test", "name: [a, b]"),
		want: []string{"t.yaml:1:7: name must be text, not a list"}},
	{name: "text where a list belongs", in: edit("[b1:9092]", "b1:9092"),
		want: []string{"t.yaml:5:14: kafka.bootstrap must be a list, not text"}},
	{name: "brokers as a mapping", in: "name: x\nbrokers:\n  id: 1\n",
		want: []string{"t.yaml:3:5: brokers must be a list, not a mapping"}},
	{name: "top level is a list", in: "- a\n- b\n",
		want: []string{"t.yaml:1:1: the inventory must be a mapping of keys to values, not a list"}},
	{name: "duplicate key", in: edit("    host: b1\n", "    host: b1\n    host: b2\n"),
		want: []string{`t.yaml:11:5: mapping key "host" already defined at [10:5]`}},
	{name: "duplicate top-level section", in: minimal + "kafka:\n  bootstrap: [b2:9092]\n",
		want: []string{`t.yaml:13:1: mapping key "kafka" already defined at [4:1]`}},
	{name: "tab indentation", in: edit("  connect:", "\tconnect:"),
		want: []string{`t.yaml:3:1: found character '\t' that cannot start any token; YAML indents with spaces, never tabs`}},
	{name: "garbage YAML", in: "name: [x\n",
		want: []string{"t.yaml:1:7: sequence end token ']' not found"}},
	{name: "garbage text", in: "}}}{{{ :: !!\n",
		want: []string{`t.yaml:1:1: unknown key "}}}{{{ :"`, "t.yaml:1:11: }}}{{{ :: YAML tags (!) are not supported"}},
	{name: "empty file", in: "",
		want: []string{"t.yaml:1:1: the inventory is empty"}},
	{name: "only comments", in: "# nothing here\n\n",
		want: []string{"t.yaml:1:1: the inventory is empty"}},
	{name: "two documents", in: minimal + "---\nname: other\n",
		want: []string{"t.yaml:14:5: a second YAML document"}},
	{name: "invalid UTF-8", in: edit("name: test", "name: te\xffst"),
		want: []string{"t.yaml:1:9: the file is not valid UTF-8 text"}},
	{name: "line break in a command", in: edit("    stop: systemctl stop kafka\n", "    stop: |\n      systemctl stop kafka\n"),
		want: []string{"t.yaml:11:11: brokers[0].stop contains a line break (U+000A)"}},
	{name: "bidi override in a command", in: edit("stop: systemctl stop kafka", "stop: \"systemctl stop kafka \u202e\""),
		want: []string{"t.yaml:11:11: brokers[0].stop contains an invisible formatting character (U+202E)"}},
	{name: "NUL in a host", in: edit("host: b1", `host: "b1\0"`),
		want: []string{"t.yaml:10:11: brokers[0].host contains a control character (U+0000)"}},
	{name: "anchor and alias", in: edit("    stop: systemctl stop kafka\n    start: systemctl start kafka\n",
		"    stop: &cmd systemctl stop kafka\n    start: *cmd\n"),
		want: []string{
			"t.yaml:11:11: brokers[0].stop: anchors (&) are not supported",
			"t.yaml:12:12: brokers[0].start: aliases (*) are not supported",
		}},
	{name: "tag", in: edit("name: test", "name: !!str test"),
		want: []string{"t.yaml:1:7: name: YAML tags (!) are not supported"}},
	{name: "inline password under auth", in: edit("  connect: zk1:2181/kafka\n",
		"  connect: zk1:2181/kafka\n  auth:\n    user: kremedy\n    password: hunter2\n"),
		want: []string{"t.yaml:6:5: zookeeper.auth.password: kremedy never reads a password from the inventory; remove it and set zookeeper.auth.password_env"}},
	{name: "inline password anywhere, even under an unknown key", in: minimal + "extra:\n  sasl_password: hunter2\n",
		want: []string{
			`t.yaml:13:1: unknown key "extra" at the top level`,
			"t.yaml:14:3: extra.sasl_password: kremedy never reads a password",
		}},
	{name: "decoder errors are all collected", in: edit("id: 1", "id: one") + "  - id: two\n    hots: b2\n",
		want: []string{
			"t.yaml:9:9: brokers[0].id must be a whole number",
			"t.yaml:13:9: brokers[1].id must be a whole number",
			`t.yaml:14:5: unknown key "hots" in brokers[1]`,
		}},

	// Validation errors, reported after decoding.
	{name: "missing connect", in: edit("  connect: zk1:2181/kafka\n", "  auth:\n"),
		want: []string{"t.yaml:2:1: zookeeper.connect is required"}},
	{name: "missing zookeeper section", in: edit("zookeeper:\n  connect: zk1:2181/kafka\n", ""),
		want: []string{"t.yaml:1:1: zookeeper.connect is required"}},
	{name: "bad chroot", in: edit("zk1:2181/kafka", "zk1:2181/kafka/"),
		want: []string{`t.yaml:3:12: zookeeper.connect: zookeeper chroot "/kafka/" is not a clean absolute path`}},
	{name: "bad zookeeper port", in: edit("zk1:2181/kafka", "zk1:99999/kafka"),
		want: []string{`t.yaml:3:12: zookeeper.connect: zookeeper server "zk1:99999": bad port`}},
	{name: "auth without password source", in: edit("  connect: zk1:2181/kafka\n", "  connect: zk1:2181/kafka\n  auth:\n    user: kremedy\n"),
		want: []string{"t.yaml:4:3: zookeeper.auth needs password_env"}},
	{name: "auth with both password sources", in: edit("  connect: zk1:2181/kafka\n",
		"  connect: zk1:2181/kafka\n  auth:\n    user: kremedy\n    password_env: ZK_PW\n    password_file: /pw\n"),
		want: []string{"t.yaml:7:20: zookeeper.auth has both password_env and password_file"}},
	{name: "auth with bad env name and user", in: edit("  connect: zk1:2181/kafka\n",
		"  connect: zk1:2181/kafka\n  auth:\n    user: a:b\n    password_env: $ZK_PW\n"),
		want: []string{
			`t.yaml:5:11: zookeeper.auth.user "a:b" must not contain ':'`,
			`t.yaml:6:19: zookeeper.auth.password_env "$ZK_PW" is not an environment variable name`,
		}},
	{name: "max_in_flight within its bounds", in: edit("  connect: zk1:2181/kafka\n", "  connect: zk1:2181/kafka\n  max_in_flight: 32\n")},
	{name: "max_in_flight above ZooKeeper's share", in: edit("  connect: zk1:2181/kafka\n", "  connect: zk1:2181/kafka\n  max_in_flight: 1000\n"),
		want: []string{"t.yaml:4:18: zookeeper.max_in_flight is 1000; it must be kremedy's ZooKeeper reads in flight, 1 to 256"}},
	{name: "missing name", in: edit("name: test\n", ""),
		want: []string{"t.yaml:1:1: name is required"}},
	{name: "empty bootstrap", in: edit("[b1:9092]", "[]"),
		want: []string{"t.yaml:5:3: kafka.bootstrap is required"}},
	{name: "bootstrap without port", in: edit("[b1:9092]", "[b1:9092, b2]"),
		want: []string{`t.yaml:5:24: kafka.bootstrap[1] "b2" is not host:port`}},
	{name: "no brokers", in: edit("brokers:\n  - id: 1\n    host: b1\n    stop: systemctl stop kafka\n    start: systemctl start kafka\n", "brokers: []\n"),
		want: []string{"t.yaml:8:1: brokers is required"}},
	{name: "empty broker entry", in: minimal + "  -\n",
		want: []string{"t.yaml:13:3: brokers[1] is empty"}},
	{name: "broker without id", in: edit("  - id: 1\n    host: b1\n", "  - host: b1\n"),
		want: []string{"t.yaml:9:5: brokers[0] has no id"}},
	{name: "duplicate broker id", in: minimal + "  - id: 1\n    host: b2\n    stop: x\n    start: y\n",
		want: []string{"t.yaml:13:9: brokers[1].id: broker id 1 is also used by brokers[0]; broker ids are unique"}},
	{name: "host with shell metacharacters", in: edit("host: b1", `host: "b1;rm -rf /"`),
		want: []string{`t.yaml:10:11: brokers[0].host "b1;rm -rf /": a host may hold only letters`}},
	{name: "host that is an ssh option", in: edit("host: b1", "host: -oProxyCommand=id"),
		want: []string{`t.yaml:10:11: brokers[0].host "-oProxyCommand=id"`}},
	{name: "host with whitespace", in: edit("host: b1", "host: b1 b2"),
		want: []string{`t.yaml:10:11: brokers[0].host "b1 b2"`}},
	{name: "user@host", in: edit("host: b1", "host: kafka@b1"),
		want: []string{`t.yaml:10:11: brokers[0].host "kafka@b1"`}},
	{name: "empty stop and start", in: edit("    stop: systemctl stop kafka\n    start: systemctl start kafka\n", "    stop: \"\"\n    start: \" \"\n"),
		want: []string{"t.yaml:11:11: brokers[0].stop is required", "t.yaml:12:12: brokers[0].start is required"}},
	{name: "relative log dir", in: edit("    host: b1\n", "    host: b1\n    log_dirs: [data]\n"),
		want: []string{`t.yaml:11:16: brokers[0].log_dirs[0] "data" is not an absolute path`}},
	{name: "unclean, root, duplicate and nested log dirs", in: edit("    host: b1\n",
		"    host: b1\n    log_dirs:\n      - /data/../kafka\n      - /\n      - /kafka\n      - /kafka\n      - /kafka/sub\n      - /a,/b\n"),
		want: []string{
			`t.yaml:12:9: brokers[0].log_dirs[0] "/data/../kafka" is not a clean path; write it as "/kafka"`,
			"t.yaml:13:9: brokers[0].log_dirs[1] is the root directory",
			`t.yaml:15:9: brokers[0].log_dirs[3] "/kafka" is listed twice (also brokers[0].log_dirs[2])`,
			`t.yaml:16:9: brokers[0].log_dirs[4] "/kafka/sub" and brokers[0].log_dirs[2] "/kafka" are nested`,
			`t.yaml:16:9: brokers[0].log_dirs[4] "/kafka/sub" and brokers[0].log_dirs[3] "/kafka" are nested`,
			`t.yaml:17:9: brokers[0].log_dirs[5] "/a,/b" contains ','`,
		}},
	{name: "log dirs with characters a script could misread", in: edit("    host: b1\n",
		"    host: b1\n    log_dirs:\n      - /data/k[1]\n      - \"/data/$(id)\"\n      - /data/k*\n      - \"/data/a b\"\n      - /data/k`id`\n      - /data/k?\n      - \"/data/\\\\k\"\n      - /mnt/d-1/k_a.b+c@d=e:f\n"),
		want: []string{
			`t.yaml:12:9: brokers[0].log_dirs[0] "/data/k[1]": not a log dir path kremedy uses: it holds '['; a log dir may hold only letters A-Z a-z, digits 0-9 and . _ - / + @ = :`,
			`t.yaml:13:9: brokers[0].log_dirs[1] "/data/$(id)": not a log dir path kremedy uses: it holds '$'`,
			`t.yaml:14:9: brokers[0].log_dirs[2] "/data/k*": not a log dir path kremedy uses: it holds '*'`,
			`t.yaml:15:9: brokers[0].log_dirs[3] "/data/a b": not a log dir path kremedy uses: it holds ' '`,
			"t.yaml:16:9: brokers[0].log_dirs[4] \"/data/k`id`\": not a log dir path kremedy uses: it holds '`'",
			`t.yaml:17:9: brokers[0].log_dirs[5] "/data/k?": not a log dir path kremedy uses: it holds '?'`,
			`t.yaml:18:9: brokers[0].log_dirs[6] "/data/\\k": not a log dir path kremedy uses: it holds '\\'`,
		}},
	{name: "no known_hosts anywhere", in: edit("  known_hosts: /etc/kremedy/known_hosts\n", "  user: kafka\n"),
		want: []string{"t.yaml:9:5: brokers[0] has no known_hosts file: set ssh.known_hosts or brokers[0].known_hosts; kremedy never trusts a host key on first use"}},
	{name: "bad ssh user and proxy jump", in: edit("ssh:\n", "ssh:\n  user: -l\n  proxy_jump: bastion;id\n"),
		want: []string{`t.yaml:7:9: ssh.user "-l"`, `t.yaml:8:15: ssh.proxy_jump "bastion;id"`}},
	{name: "tilde user path", in: edit("/etc/kremedy/known_hosts", "~kafka/.ssh/known_hosts"),
		want: []string{`t.yaml:7:16: ssh.known_hosts "~kafka/.ssh/known_hosts": only ~/ is expanded`}},
	{name: "clients: missing name, duplicate name, bad host", in: minimal +
		"clients:\n  - name: c\n    host: a\n    stop: x\n    start: y\n  - name: c\n    host: a b\n    stop: x\n    start: y\n  - host: a\n    stop: x\n    start: y\n",
		want: []string{
			`t.yaml:18:11: clients[1].name "c" is also used by clients[0]`,
			`t.yaml:19:11: clients[1].host "a b"`,
			"t.yaml:22:5: clients[2].name is required",
		}},
	{name: "validation errors are all collected", in: "name: x\nzookeeper:\n  connect: zk1:2181/kafka/\nbrokers:\n  - id: 1\n    host: b1\n",
		want: []string{
			"t.yaml:1:1: kafka.bootstrap is required", // no kafka section: at the start of the file
			"t.yaml:3:12: zookeeper.connect: zookeeper chroot",
			"t.yaml:5:5: brokers[0].stop is required",
			"t.yaml:5:5: brokers[0].start is required",
			"t.yaml:5:5: brokers[0] has no known_hosts file",
		}},
	{name: "too large", in: "name: x\n" + strings.Repeat("# padding\n", MaxSize/10+1),
		want: []string{"t.yaml:1:1: the file is larger than 256 KiB"}},
	{name: "nested too deeply", in: "name: " + strings.Repeat("[", 100),
		want: []string{"t.yaml:1:39: YAML nested too deeply"}},
	{name: "indented too deeply", in: "name: x\nbrokers:\n" + strings.Repeat("- ", 200),
		want: []string{"t.yaml:3:1: YAML nested too deeply"}},
}

// errorList flattens what Parse returns into its *Error values.
func errorList(t *testing.T, err error) []*Error {
	t.Helper()
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]*Error, len(errs))
	for i, e := range errs {
		if !errors.As(e, &out[i]) {
			t.Fatalf("error %v (%T) is not an *inventory.Error", e, e)
		}
	}
	return out
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := Parse("t.yaml", []byte(tc.in))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if inv == nil {
					t.Fatal("Parse returned nil and no error")
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse succeeded, want errors:\n%s", strings.Join(tc.want, "\n"))
			}
			if inv != nil {
				t.Errorf("Parse returned an inventory along with an error")
			}
			got := errorList(t, err)
			var lines []string
			for _, e := range got {
				lines = append(lines, e.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tc.want), strings.Join(lines, "\n"))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) && !containsAfterPrefix(lines[i], w) {
					t.Errorf("error %d:\n got: %s\nwant: %s...", i, lines[i], w)
				}
				if got[i].File != "t.yaml" || got[i].Line < 1 || got[i].Column < 1 {
					t.Errorf("error %d has no position: %+v", i, got[i])
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error echoes the password: %v", err)
			}
		})
	}
}

// containsAfterPrefix accepts a want of "file:line:col: part" where part is
// anywhere in the message, as long as the position is exact.
func containsAfterPrefix(got, want string) bool {
	prefix, part, ok := cutPosition(want)
	if !ok {
		return false
	}
	return strings.HasPrefix(got, prefix) && strings.Contains(got[len(prefix):], part)
}

func cutPosition(s string) (prefix, rest string, ok bool) {
	i := strings.Index(s, ": ")
	if i < 0 {
		return "", "", false
	}
	return s[:i+2], s[i+2:], true
}

func TestParseExample(t *testing.T) {
	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Parse("example.yaml", data)
	if err != nil {
		t.Fatalf("example.yaml does not parse: %v", err)
	}
	want := &Inventory{
		Name: "prod-eu1",
		Mode: ModeZooKeeper,
		ZooKeeper: ZooKeeper{
			Connect: "zk1:2181,zk2:2181,zk3:2181/kafka",
			Auth:    &ZKAuth{User: "kremedy", PasswordEnv: "KREMEDY_ZK_PASSWORD"},
		},
		Kafka: Kafka{
			Bootstrap:        []string{"b1.internal:9092", "b2.internal:9092"},
			ClientProperties: "/etc/kremedy/client.properties",
		},
		SSH: SSH{
			User: "kafka", Port: 22, IdentityFile: "~/.ssh/id_ed25519", Agent: true,
			KnownHosts: "~/.ssh/known_hosts", Config: "~/.ssh/config", ProxyJump: "bastion",
			ConnectTimeout: Duration{10 * time.Second}, Become: "sudo",
		},
		Brokers: []Broker{
			{ID: 1, Host: "b1.internal", Port: 22, Stop: "systemctl stop kafka", Start: "systemctl start kafka",
				LogDirs: []string{"/var/lib/kafka/data"}, ServerLog: "/var/log/kafka/server.log"},
			{ID: 2, Host: "b2.internal", Stop: "systemctl stop kafka", Start: "systemctl start kafka",
				LogDirs: []string{"/var/lib/kafka/data-1", "/var/lib/kafka/data-2"}},
		},
		Clients: []Client{{Name: "orders-consumer", Host: "app1.internal",
			Stop: "sudo -n systemctl stop orders-consumer", Start: "sudo -n systemctl start orders-consumer"}},
		Notify: []Notify{{URLEnv: "KREMEDY_SLACK_WEBHOOK"},
			{URL: "https://ops.example.com/hooks/kremedy", TokenEnv: "KREMEDY_NOTIFY_TOKEN", Format: "json"}},
		Policy: &Policy{Approvals: 2, AllowedSigners: "~/.config/kremedy/allowed_signers", Timeout: Duration{30 * time.Minute}, Group: "kremedy-approvers"},
	}
	if !reflect.DeepEqual(inv, want) {
		t.Errorf("example.yaml parsed to\n%+v\nwant\n%+v", inv, want)
	}
}

// tricky has values that need quoting in YAML.
func tricky() *Inventory {
	return &Inventory{
		Name: "prod: eu1 # main",
		Lab:  true,
		ZooKeeper: ZooKeeper{Connect: "127.0.0.1:2181,[::1]:2181/kafka",
			Auth: &ZKAuth{User: "yes", PasswordFile: "~/zk pw"}},
		Kafka: Kafka{Bootstrap: []string{"127.0.0.1:9092", "[::1]:9093", "b1:9092"}, ClientProperties: "null"},
		SSH: SSH{User: "kafka", Port: 2222, IdentityFile: "~/.ssh/id", Agent: true, KnownHosts: "@known 'hosts'",
			Config: "true", ProxyJump: "ops@bastion:2022,jump2", ConnectTimeout: Duration{1500 * time.Millisecond}},
		Brokers: []Broker{
			{ID: 0, Host: "10.0.0.1", Stop: `sudo -n sh -c 'kill "$(cat /run/kafka.pid)"'`, Start: "- start: now",
				LogDirs: []string{"/var/lib/kafka/data:1", "/k@a=f+k_a.b-c"}},
			{ID: 2147483647, Host: "b2", Port: 22, User: "root", IdentityFile: "rel/key", KnownHosts: "kh",
				Stop: "stop\\ \"quoted\" \u00a0nbsp", Start: "start:", LogDirs: []string{"/d"}},
		},
		Clients: []Client{{Name: "orders: consumer", Host: "app1", Stop: "*stop", Start: "[start]"}},
		Notify: []Notify{{URL: "https://ops.example.com/h?a=1&b=#x", TokenFile: "~/tok en"},
			{URLFile: "rel/slack url", Format: "slack"}, {URLEnv: "X_1", TokenEnv: "Y"}, {URL: "http://[::1]:8080/", TokenEnv: "T"}},
		Policy: &Policy{Approvals: 9, AllowedSigners: "#signers: yes", Timeout: Duration{90 * time.Second}, InLab: true, Group: "_ops.team-1"},
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	example, err := Parse("example.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	for name, inv := range map[string]*Inventory{"example": example, "tricky": tricky()} {
		t.Run(name, func(t *testing.T) {
			out, err := inv.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(out), "# kremedy inventory") {
				t.Errorf("Marshal output has no header comment:\n%s", out)
			}
			got, err := Parse("marshalled.yaml", out)
			if err != nil {
				t.Fatalf("Parse(Marshal()): %v\n%s", err, out)
			}
			if !reflect.DeepEqual(got, inv) {
				t.Errorf("round trip changed the inventory:\n got %+v\nwant %+v\nYAML:\n%s", got, inv, out)
			}
		})
	}
}

func TestMarshalQuotesWhatYAMLWouldMisread(t *testing.T) {
	base, err := Parse("t.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{
		"true", "True", "FALSE", "yes", "No", "y", "n", "on", "OFF", "null", "Null", "~", "~/x", "~x",
		"-", "- x", "-x", "? x", "?", ": x", "a: b", "a:", "a:b", "a #b", "#a", "a#b", "'", "\"", "\\", "\\n",
		"@x", "`x`", "%x", "!x", "&x", "*x", "|", ">", "[", "]", "{", "}", ",", "=", "<<",
		"0", "007", "0x10", "0o17", "1e3", ".5", "1.", ".inf", "-.inf", ".nan", "1_000", "+1", "2001-12-14", "1:20",
		" lead", "trail ", "a  b", "ünï", "\u00a0", "\u2028", "\u2029", "😀", "\uFFFD", "\uE000x", "\U0010FFFDx", "\u0378x",
		"a\\b", `C:\dir`, "x: y # z", "--- x", "...", "---",
	} {
		inv := *base
		inv.Name = v
		if strings.TrimSpace(v) == "" {
			inv.Name = "x" + v // a blank name is rightly refused
		}
		inv.Brokers = []Broker{base.Brokers[0]}
		inv.Brokers[0].Stop = v + " stop"
		out, err := inv.Marshal()
		if err != nil {
			t.Errorf("Marshal(%q): %v", v, err)
			continue
		}
		got, err := Parse("m.yaml", out)
		if err != nil {
			t.Errorf("value %q: Parse(Marshal()): %v\n%s", v, err, out)
			continue
		}
		if got.Name != inv.Name || got.Brokers[0].Stop != v+" stop" {
			t.Errorf("value %q came back as %q / %q:\n%s", v, got.Name, got.Brokers[0].Stop, out)
		}
	}
}

func TestMarshalRejectsInvalidUTF8(t *testing.T) {
	inv := tricky()
	inv.Brokers[0].Stop = "stop\xff"
	if _, err := inv.Marshal(); err == nil {
		t.Fatal("Marshal accepted invalid UTF-8")
	}
}

func TestLoadResolvesPaths(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	in := `name: test
zookeeper:
  connect: zk1:2181/kafka
  auth:
    user: kremedy
    password_file: secrets/zk
kafka:
  bootstrap: [b1:9092]
  client_properties: ./client.properties
ssh:
  identity_file: ~/.ssh/id_ed25519
  known_hosts: known_hosts
  config: /etc/ssh/ssh_config
brokers:
  - id: 1
    host: b1
    identity_file: ../keys/b1
    known_hosts: ~
    stop: stop
    start: start
    log_dirs: [/var/lib/kafka]
`
	// "~" alone is YAML null, so broker 1 has no known_hosts override.
	path := filepath.Join(dir, "inv.yaml")
	if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // resolution must not depend on the working directory
	inv, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"Path", inv.Path, path},
		{"password_file", inv.ZooKeeper.Auth.PasswordFile, filepath.Join(dir, "secrets/zk")},
		{"client_properties", inv.Kafka.ClientProperties, filepath.Join(dir, "client.properties")},
		{"ssh.identity_file", inv.SSH.IdentityFile, filepath.Join(home, ".ssh/id_ed25519")},
		{"ssh.known_hosts", inv.SSH.KnownHosts, filepath.Join(dir, "known_hosts")},
		{"ssh.config", inv.SSH.Config, "/etc/ssh/ssh_config"},
		{"broker identity_file", inv.Brokers[0].IdentityFile, filepath.Join(filepath.Dir(dir), "keys/b1")},
		{"broker known_hosts", inv.Brokers[0].KnownHosts, ""},
		{"log_dirs are remote and untouched", inv.Brokers[0].LogDirs[0], "/var/lib/kafka"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	// "none" is ssh's word for no config file, not a file beside the inventory.
	if err := os.WriteFile(path, []byte(strings.Replace(in, "config: /etc/ssh/ssh_config", "config: none", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if inv, err := Load(path); err != nil || inv.SSH.Config != SSHConfigNone {
		t.Fatalf("config: none loaded as %q (%v)", inv.SSH.Config, err)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"))
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(missing) = %v, want an *Error wrapping fs.ErrNotExist", err)
	}
	if e.Line != 0 || !strings.Contains(e.Error(), "missing.yaml: cannot read the inventory") {
		t.Errorf("unexpected error text %q", e.Error())
	}

	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte(edit("id: 1", "id: one")), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if !errors.As(err, &e) || e.Error() != path+":9:9: brokers[0].id must be a whole number, not text" {
		t.Fatalf("Load(bad) = %v", err)
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv := tricky()
	if err := Write(path, inv); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, inv) {
		t.Errorf("written inventory reads back as\n%+v\nwant\n%+v", got, inv)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}

	// An inventory that would not load back is not written.
	bad := tricky()
	bad.Brokers[1].ID = 0
	if err := Write(path, bad); err == nil || !strings.Contains(err.Error(), "broker id 0 is also used") {
		t.Fatalf("Write(duplicate ids) = %v", err)
	}
	after, _ := os.ReadFile(path)
	if string(after) != string(data) {
		t.Error("a refused Write changed the file")
	}
}

func TestBrokerAndSSHFor(t *testing.T) {
	inv, err := Parse("t.yaml", []byte(minimal+`  - id: 2
    host: b2
    port: 2222
    user: admin
    identity_file: /k2
    known_hosts: /kh2
    stop: x
    start: y
`))
	if err != nil {
		t.Fatal(err)
	}
	inv.SSH.User, inv.SSH.IdentityFile, inv.SSH.Agent = "kafka", "/k", true

	b1, ok := inv.Broker(1)
	if !ok || b1.Host != "b1" {
		t.Fatalf("Broker(1) = %+v, %v", b1, ok)
	}
	if _, ok := inv.Broker(3); ok {
		t.Error("Broker(3) found a broker that does not exist")
	}
	want1 := SSH{User: "kafka", Port: 22, IdentityFile: "/k", Agent: true, KnownHosts: "/etc/kremedy/known_hosts"}
	if got := inv.SSHFor(b1); got != want1 {
		t.Errorf("SSHFor(b1) = %+v, want %+v", got, want1)
	}
	b2, _ := inv.Broker(2)
	want2 := SSH{User: "admin", Port: 2222, IdentityFile: "/k2", Agent: true, KnownHosts: "/kh2"}
	if got := inv.SSHFor(b2); got != want2 {
		t.Errorf("SSHFor(b2) = %+v, want %+v", got, want2)
	}
	inv.SSH.Port = 2200
	if got := inv.SSHFor(b1).Port; got != 2200 {
		t.Errorf("SSHFor(b1).Port = %d, want the default 2200", got)
	}
}

func TestZKPassword(t *testing.T) {
	const secret = "s3cr3t-value"
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KREMEDY_TEST_ZK_PW", secret)
	t.Setenv("KREMEDY_TEST_EMPTY", "")

	tests := []struct {
		name    string
		auth    *ZKAuth
		want    string
		wantErr string // names the source
	}{
		{"no auth", nil, "", ""},
		{"env", &ZKAuth{User: "u", PasswordEnv: "KREMEDY_TEST_ZK_PW"}, secret, ""},
		{"file", &ZKAuth{User: "u", PasswordFile: pwFile}, secret, ""},
		{"unset env", &ZKAuth{User: "u", PasswordEnv: "KREMEDY_TEST_UNSET"}, "", "KREMEDY_TEST_UNSET is not set"},
		{"empty env", &ZKAuth{User: "u", PasswordEnv: "KREMEDY_TEST_EMPTY"}, "", "KREMEDY_TEST_EMPTY is empty"},
		{"missing file", &ZKAuth{User: "u", PasswordFile: filepath.Join(dir, "nope")}, "", filepath.Join(dir, "nope")},
		{"empty file", &ZKAuth{User: "u", PasswordFile: emptyFile}, "", emptyFile + " (zookeeper.auth.password_file) is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := &Inventory{ZooKeeper: ZooKeeper{Auth: tt.auth}}
			got, err := inv.ZKPassword()
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrNoPassword) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ZKPassword() error = %v, want ErrNoPassword naming %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error reveals the password: %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ZKPassword() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{File: "inv.yaml", Line: 3, Column: 7, Msg: "bad"}
	if got := e.Error(); got != "inv.yaml:3:7: bad" {
		t.Errorf("Error() = %q", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		if len(tc.in) < 4096 {
			f.Add([]byte(tc.in))
		}
	}
	if data, err := os.ReadFile("example.yaml"); err == nil {
		f.Add(data)
	}
	if data, err := tricky().Marshal(); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := Parse("fuzz.yaml", data)
		if err != nil {
			for _, e := range errorList(t, err) {
				if e.Line < 1 || e.Column < 1 {
					t.Fatalf("error without a position: %v", e)
				}
			}
			return
		}
		out, err := inv.Marshal()
		if err != nil {
			t.Fatalf("Marshal after a successful Parse: %v", err)
		}
		again, err := Parse("fuzz.yaml", out)
		if err != nil {
			t.Fatalf("Parse(Marshal(Parse(data))): %v\ninput:\n%q\nmarshalled:\n%s", err, data, out)
		}
		if !reflect.DeepEqual(inv, again) {
			t.Fatalf("round trip changed the inventory:\n first %+v\nsecond %+v\nmarshalled:\n%s", inv, again, out)
		}
	})
}

// kraft_controllers: read, written back the same, and refused with the
// line and column of what is wrong.
func TestKRaftControllers(t *testing.T) {
	good := minimal + `    config: /etc/kafka/server.properties
kraft_controllers:
  - id: 3001
    host: c1
    listener: c1:9093
    config: /etc/kafka/controller.properties
    stop: systemctl stop kafka-controller
    start: systemctl start kafka-controller
`
	inv, err := Parse("t.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	c := inv.KRaftControllers
	if len(c) != 1 || c[0].ID != 3001 || c[0].Listener != "c1:9093" || c[0].Config != "/etc/kafka/controller.properties" || inv.Brokers[0].Config != "/etc/kafka/server.properties" {
		t.Fatalf("read %+v", inv)
	}
	b, err := inv.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("t.yaml", b)
	if err != nil || !reflect.DeepEqual(back.KRaftControllers, inv.KRaftControllers) || back.Brokers[0].Config != inv.Brokers[0].Config {
		t.Fatalf("round trip: %v\n%s", err, b)
	}
	for _, c := range []struct{ old, new, want string }{
		{"id: 3001", "id: 1", "t.yaml:15:9: kraft_controllers[0].id: node id 1 is also brokers[0]'s broker id"},
		{"listener: c1:9093", "listener: c1", "t.yaml:17:15: kraft_controllers[0].listener \"c1\" is not host:port"},
		{"config: /etc/kafka/controller.properties", "config: controller.properties", "t.yaml:18:13: kraft_controllers[0].config \"controller.properties\": use a clean absolute path"},
		{"    config: /etc/kafka/server.properties\n", "    config: /etc/../kafka/server.properties\n", "t.yaml:13:13: brokers[0].config"},
		{"    config: /etc/kafka/server.properties\n", "    config: /etc/kafka/server.properties\n    server_log: logs/server.log\n", "t.yaml:14:17: brokers[0].server_log \"logs/server.log\": use a clean absolute path"},
		{"config: /etc/kafka/controller.properties", "config: /etc/kafka/controller.properties\n    server_log: /var/log/kafka/server.log", `unknown key "server_log" in kraft_controllers[0]`},
	} {
		_, err := Parse("t.yaml", []byte(strings.Replace(good, c.old, c.new, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: %v, want %q", c.old, c.new, err, c.want)
		}
	}
	if _, err := Parse("t.yaml", []byte(strings.Replace(good, "    listener: c1:9093\n", "    log_dirs: [/x]\n", 1))); err == nil || !strings.Contains(err.Error(), `unknown key "log_dirs" in kraft_controllers[0]`) {
		t.Errorf("log_dirs on a controller: %v", err)
	}
}

// TestKRaftMode: mode: kraft is an inventory without a zookeeper section,
// with the controllers as the quorum; it reads back as written, and every
// misuse is an error at its line and column.
func TestKRaftMode(t *testing.T) {
	good := `name: test
mode: kraft
kafka:
  bootstrap: [b1:9092]
ssh:
  known_hosts: /etc/kremedy/known_hosts
brokers:
  - id: 1
    host: b1
    stop: systemctl stop kafka
    start: systemctl start kafka
kraft_controllers:
  - id: 3001
    host: c1
    listener: c1:9093
    config: /etc/kafka/controller.properties
    stop: systemctl stop kafka-controller
    start: systemctl start kafka-controller
`
	inv, err := Parse("t.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if !inv.KRaft() || inv.ZooKeeper.Connect != "" || len(inv.KRaftControllers) != 1 {
		t.Fatalf("read %+v", inv)
	}
	b, err := inv.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("t.yaml", b)
	if err != nil || !reflect.DeepEqual(back, inv) {
		t.Fatalf("round trip: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "in KRaft mode") || strings.Contains(string(b), "zookeeper") {
		t.Errorf("a KRaft inventory's file:\n%s", b)
	}
	zk, err := Parse("t.yaml", []byte(minimal))
	if err != nil || zk.KRaft() {
		t.Fatalf("an inventory without mode is ZooKeeper mode: %+v %v", zk, err)
	}
	for _, c := range []struct{ old, new, want string }{
		{"mode: kraft\n", "mode: kraft\nzookeeper:\n  connect: zk:2181\n", "t.yaml:3:1: a KRaft-mode inventory (mode: kraft) has no zookeeper section"},
		{"mode: kraft\n", "mode: raft\n", `t.yaml:2:7: mode "raft": it is zookeeper`},
		{"mode: kraft\n", "", "t.yaml:1:1: zookeeper.connect is required"},
	} {
		_, err := Parse("t.yaml", []byte(strings.Replace(good, c.old, c.new, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q → %q: %v, want %q", c.old, c.new, err, c.want)
		}
	}
	noCtrl := good[:strings.Index(good, "kraft_controllers:")]
	if _, err := Parse("t.yaml", []byte(noCtrl)); err == nil || !strings.Contains(err.Error(), "t.yaml:2:7: mode: kraft needs kraft_controllers") {
		t.Errorf("kraft without controllers: %v", err)
	}
	// A combined node (process.roles=broker,controller): its broker entry
	// and its controller entry are one process — same id, host, stop and
	// start. Anything else with a broker's id is still refused.
	combined := noCtrl + `kraft_controllers:
  - id: 1
    host: b1
    listener: b1:9093
    config: /etc/kafka/server.properties
    stop: systemctl stop kafka
    start: systemctl start kafka
`
	inv, err = Parse("t.yaml", []byte(combined))
	if err != nil || len(inv.KRaftControllers) != 1 || inv.KRaftControllers[0].ID != 1 {
		t.Fatalf("a combined node: %+v %v", inv, err)
	}
	for _, c := range []struct{ old, new string }{
		{"    host: b1\n    listener", "    host: c1\n    listener"},
		{"    stop: systemctl stop kafka\n    start: systemctl start kafka\n", "    stop: systemctl stop kafka-controller\n    start: systemctl start kafka\n"},
		{"mode: kraft\n", "zookeeper:\n  connect: zk:2181\n"},
	} {
		in := combined[:strings.Index(combined, "kraft_controllers:")] + strings.Replace(combined[strings.Index(combined, "kraft_controllers:"):], c.old, c.new, 1)
		if c.old == "mode: kraft\n" {
			in = strings.Replace(combined, c.old, c.new, 1)
		}
		if _, err := Parse("t.yaml", []byte(in)); err == nil || !strings.Contains(err.Error(), "kraft_controllers[0].id: node id 1 is also brokers[0]'s broker id; a KRaft controller's node.id must differ from every broker.id, unless both are one combined node") {
			t.Errorf("%q → %q: %v", c.old, c.new, err)
		}
	}
}
