package kafka

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

var jaasField = regexp.MustCompile(`(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))`)

// jaas reads the options of a sasl.jaas.config line
// (LoginModule required key="value" key=value …;).
func jaas(cfg string) map[string]string {
	out := map[string]string{}
	for _, m := range jaasField.FindAllStringSubmatch(cfg, -1) {
		v := m[3]
		if m[3] == "" {
			v = strings.ReplaceAll(m[2], `\"`, `"`)
		}
		out[m[1]] = v
	}
	return out
}

// Options turns client properties into franz-go options, as Kafka's Java
// client reads them: security.protocol PLAINTEXT, SSL, SASL_PLAINTEXT and
// SASL_SSL; trust and key stores as JKS, PKCS12 or PEM (files or inline),
// ssl.key.password, ssl.endpoint.identification.algorithm; SASL PLAIN,
// SCRAM-SHA-256 and SCRAM-SHA-512 from sasl.jaas.config. GSSAPI and
// OAUTHBEARER are refused with what to use instead. It returns the secrets
// it read so that callers keep them out of journals and logs.
func Options(props map[string]string) (opts []kgo.Opt, secrets []string, err error) {
	proto := strings.ToUpper(props["security.protocol"])
	if proto == "" {
		proto = "PLAINTEXT"
	}
	for _, k := range []string{"ssl.truststore.password", "ssl.keystore.password", "ssl.key.password", "ssl.keystore.key"} {
		if v := props[k]; v != "" {
			secrets = append(secrets, v)
		}
	}
	switch proto {
	case "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		cfg, err := TLSConfig(props)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	default:
		return nil, nil, fmt.Errorf("%w: security.protocol=%s (Kafka knows PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", ErrUnsupportedProperty, proto)
	}
	if strings.HasPrefix(proto, "SASL") {
		mech, pass, err := saslOpt(props)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, mech)
		secrets = append(secrets, pass)
	}
	return opts, secrets, nil
}

func saslOpt(props map[string]string) (kgo.Opt, string, error) {
	mech := strings.ToUpper(props["sasl.mechanism"])
	if mech == "" {
		mech = "GSSAPI" // Kafka's default
	}
	switch mech {
	case "GSSAPI":
		return nil, "", fmt.Errorf("%w: sasl.mechanism=GSSAPI (Kerberos; Kafka's default when sasl.mechanism is unset): kremedy does not speak Kerberos yet; give it a client.properties with a SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN user on a listener that enables one (nothing was connected)", ErrUnsupportedProperty)
	case "OAUTHBEARER":
		return nil, "", fmt.Errorf("%w: sasl.mechanism=OAUTHBEARER: kremedy does not fetch OAuth tokens yet; give it a client.properties with a SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN user on a listener that enables one (nothing was connected)", ErrUnsupportedProperty)
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return nil, "", fmt.Errorf("%w: sasl.mechanism=%s (kremedy supports PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", ErrUnsupportedProperty, mech)
	}
	cfg := props["sasl.jaas.config"]
	if cfg == "" {
		return nil, "", fmt.Errorf("%w: sasl.mechanism=%s needs sasl.jaas.config (kremedy does not read a JAAS file from java.security.auth.login.config)", ErrUnsupportedProperty, mech)
	}
	o := jaas(cfg)
	user, pass := o["username"], o["password"]
	if user == "" || pass == "" {
		return nil, "", fmt.Errorf("%w: sasl.jaas.config needs username=\"…\" and password=\"…\" for %s", ErrUnsupportedProperty, mech)
	}
	switch mech {
	case "PLAIN":
		return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()), pass, nil
	case "SCRAM-SHA-256":
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()), pass, nil
	default:
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()), pass, nil
	}
}
