package kafka

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParseProperties(t *testing.T) {
	got, err := ParseProperties([]byte("# comment\n! also\nsecurity.protocol=SASL_SSL\nsasl.mechanism : SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n  username=\"ops\" password=\"s3cr\\\"et\";\n"))
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
	if _, err := ParseProperties([]byte("no separator here\n")); err == nil {
		t.Fatal("a line without = parsed")
	}
}

func TestOptionsRefusals(t *testing.T) {
	dir := t.TempDir()
	jks := filepath.Join(dir, "ts.jks")
	os.WriteFile(jks, []byte("x"), 0o600)
	for name, props := range map[string]map[string]string{
		"gssapi":           {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": `x username="a" password="b";`},
		"oauth":            {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": `x username="a" password="b";`},
		"no credentials":   {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
		"jks truststore":   {"security.protocol": "SSL", "ssl.truststore.location": jks, "ssl.truststore.type": "JKS"},
		"encrypted key":    {"security.protocol": "SSL", "ssl.key.password": "x"},
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
