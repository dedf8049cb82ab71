package kafka

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	got, err := ParseProperties([]byte("# comment\n! also\nsecurity.protocol=SASL_SSL\nsasl.mechanism : SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n  username=\"ops\" password=\"s3cr\\\\\\\"et\";\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got["security.protocol"] != "SASL_SSL" || got["sasl.mechanism"] != "SCRAM-SHA-512" {
		t.Fatalf("%v", got)
	}
	opts, secrets, err := Options(got)
	if err != nil || len(opts) != 2 || len(secrets) != 1 || secrets[0] != `s3cr"et` {
		t.Fatalf("opts %d secrets %q err %v", len(opts), secrets, err)
	}
	// As java.util.Properties: a blank separates key and value too.
	if p, err := ParseProperties([]byte("no separator here\n")); err != nil || p["no"] != "separator here" {
		t.Fatalf("%q %v", p, err)
	}
}

func TestOptionsRefusals(t *testing.T) {
	dir := t.TempDir()
	jks := filepath.Join(dir, "ts.jks")
	os.WriteFile(jks, []byte("x"), 0o600)
	jceks := filepath.Join(dir, "ts.jceks")
	os.WriteFile(jceks, []byte{0xce, 0xce, 0xce, 0xce, 0, 0, 0, 2}, 0o600)
	for name, props := range map[string]map[string]string{
		"gssapi":           {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": `x username="a" password="b";`},
		"oauth":            {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": `x username="a" password="b";`},
		"no credentials":   {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
		"jks truststore":   {"security.protocol": "SSL", "ssl.truststore.location": jks, "ssl.truststore.type": "JKS"},
		"not a store":      {"security.protocol": "SSL", "ssl.truststore.location": jks},
		"jceks":            {"security.protocol": "SSL", "ssl.truststore.location": jceks},
		"default gssapi":   {"security.protocol": "SASL_SSL"},
		"unknown protocol": {"security.protocol": "KERBEROS"},
	} {
		if _, _, err := Options(props); !errors.Is(err, ErrUnsupportedProperty) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if opts, _, err := Options(map[string]string{}); err != nil || len(opts) != 0 {
		t.Fatalf("plaintext default: %v %v", opts, err)
	}
}

func TestConfigProviders(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.properties")
	os.WriteFile(secrets, []byte("kafka.password=caf\xc3\xa9 p\\u00e4ss\nother=x\n"), 0o600)
	os.MkdirAll(filepath.Join(dir, "d"), 0o700)
	os.WriteFile(filepath.Join(dir, "d", "user"), []byte("ops"), 0o600)
	t.Setenv("KREMEDY_TEST_TRUST_PW", "trust-me")
	head := "config.providers=file,dir,env\n" +
		"config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n" +
		"config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider\n" +
		"config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
	got, err := ParseProperties([]byte(head +
		"sasl.jaas.config=x required username=\"${dir:" + filepath.Join(dir, "d") + ":user}\" password=\"${file:" + secrets + ":kafka.password}\";\n" +
		"ssl.truststore.password=${env:KREMEDY_TEST_TRUST_PW}\n"))
	if err != nil {
		t.Fatal(err)
	}
	// The referenced file is read as UTF-8 (a Reader), client.properties as ISO-8859-1.
	if got["sasl.jaas.config"] != `x required username="ops" password="café päss";` || got["ssl.truststore.password"] != "trust-me" {
		t.Fatalf("%q", got)
	}
	for name, tc := range map[string]struct{ text, want string }{
		"undeclared provider":   {"a=${vault:x:y}\n", `config.providers does not name "vault"`},
		"missing key":           {head + "a=${file:" + secrets + ":nope}\n", `has no key "nope"`},
		"missing file":          {head + "a=${file:/nonexistent/x.properties:k}\n", "no such file"},
		"unset variable":        {head + "\n\na=${env:KREMEDY_TEST_UNSET_VAR}\n", "line 7: a: ${env:KREMEDY_TEST_UNSET_VAR}: environment variable KREMEDY_TEST_UNSET_VAR is not set"},
		"outside allowed.paths": {head + "config.providers.file.param.allowed.paths=/etc/kafka\na=${file:" + secrets + ":other}\n", "outside config.providers.file.param.allowed.paths"},
		"outside allowlist":     {head + "config.providers.env.param.allowlist.pattern=KAFKA_.*\na=${env:KREMEDY_TEST_TRUST_PW}\n", "outside config.providers.env.param.allowlist.pattern"},
		"unknown class":         {"config.providers=v\nconfig.providers.v.class=com.example.Vault\n", "com.example.Vault"},
		"class unset":           {"config.providers=v\n", "config.providers.v.class is unset"},
		"bad escape":            {"a=\\uzzzz\n", "line 1, column 3"},
	} {
		if _, err := ParseProperties([]byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q, got %v", name, tc.want, err)
		}
	}
}
