package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/javatls"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
// SCRAM-SHA-256 and SCRAM-SHA-512 from sasl.jaas.config, OAUTHBEARER
// (oauth.go), GSSAPI with a keytab or a ticket cache (kerberos.go). It
// returns the secrets
// it read so that callers keep them out of journals and logs.
func Options(props map[string]string) (opts []kgo.Opt, secrets []string, err error) {
	return OptionsWith(props, "")
}

// OptionsWith is Options with the krb5.conf a GSSAPI client reads ("":
// Krb5Conf's default).
func OptionsWith(props map[string]string, krb5Conf string) (opts []kgo.Opt, secrets []string, err error) {
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
		cfg, err := javatls.Config(props)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	default:
		return nil, nil, fmt.Errorf("%w: security.protocol=%s (Kafka knows PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", ErrUnsupportedProperty, proto)
	}
	if strings.HasPrefix(proto, "SASL") {
		mech, more, err := saslOpt(props, krb5Conf)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, mech)
		secrets = append(secrets, more...)
	}
	return opts, secrets, nil
}

func saslOpt(props map[string]string, krb5Conf string) (kgo.Opt, []string, error) {
	mech := strings.ToUpper(props["sasl.mechanism"])
	if mech == "" {
		mech = "GSSAPI" // Kafka's default
	}
	switch mech {
	case "GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER":
	default:
		return nil, nil, fmt.Errorf("%w: sasl.mechanism=%s (kremedy supports GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)", ErrUnsupportedProperty, mech)
	}
	cfg := props["sasl.jaas.config"]
	if cfg == "" {
		return nil, nil, fmt.Errorf("%w: sasl.mechanism=%s needs sasl.jaas.config (kremedy does not read a JAAS file from java.security.auth.login.config; copy its KafkaClient section's line into sasl.jaas.config)", ErrUnsupportedProperty, mech)
	}
	if mech == "GSSAPI" { // Kafka's default when sasl.mechanism is unset
		opt, err := kerberosOpt(props, cfg, krb5Conf)
		return opt, nil, err
	}
	o := jaas(cfg)
	if mech == "OAUTHBEARER" {
		return oauthOpt(props, o)
	}
	user, pass := o["username"], o["password"]
	if user == "" || pass == "" {
		return nil, nil, fmt.Errorf("%w: sasl.jaas.config needs username=\"…\" and password=\"…\" for %s", ErrUnsupportedProperty, mech)
	}
	switch mech {
	case "PLAIN":
		return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()), []string{pass}, nil
	case "SCRAM-SHA-256":
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()), []string{pass}, nil
	default:
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()), []string{pass}, nil
	}
}

// ErrSecurity means the brokers refused kremedy's credentials, or TLS
// between them failed: a setting in client.properties, not the cluster's
// state. Nothing was asked of the cluster.
var ErrSecurity = errors.New("Kafka refused the connection's security")

// CheckSecurity asks one broker for nothing (a Metadata request for no
// topic) and names a refusal of the credentials or of TLS — wrong SASL
// password or mechanism, an untrusted or expired certificate, a name the
// certificate does not carry, TLS to a plaintext listener — as
// ErrSecurity with what to check. Any other failure (a broker down, the
// network) is left to the steps that need the brokers, which say which
// broker: it returns nil then, after at most 5 s.
func (c *Client) CheckSecurity(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	_, err := req.RequestWith(ctx, c.cl)
	if err == nil {
		return nil
	}
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	var hn x509.HostnameError
	var rh tls.RecordHeaderError
	var ke *kerr.Error
	switch {
	case errors.Is(err, ErrSecurity):
		return fmt.Errorf("%w; nothing was done", err)
	case strings.Contains(err.Error(), "KDC_ERR_S_PRINCIPAL_UNKNOWN"):
		return fmt.Errorf("%w: the KDC knows no principal for the broker's service (%v): sasl.kerberos.service.name and the broker's host form it (SERVICE/HOST@REALM); kremedy, as franz-go does, uses the host it connects to — the brokers' advertised listener — so the brokers' principals must carry those names; nothing was done", ErrSecurity, err)
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("%w: %v. Check the username and password in sasl.jaas.config (and that the user exists: kafka-configs --describe --entity-type users); nothing was done", ErrSecurity, err)
	case errors.As(err, &ke) && (ke.Code == kerr.UnsupportedSaslMechanism.Code || ke.Code == kerr.IllegalSaslState.Code):
		return fmt.Errorf("%w: %v. sasl.mechanism must be one the listener enables (sasl.enabled.mechanisms); nothing was done", ErrSecurity, err)
	case errors.As(err, &ua):
		return fmt.Errorf("%w: the broker's certificate is signed by a CA the truststore does not hold (%v). Point ssl.truststore.location at the CA that signed the brokers' certificates; nothing was done", ErrSecurity, err)
	case errors.As(err, &ci):
		return fmt.Errorf("%w: the broker's certificate is not valid (%v): expired, not yet valid or not for serving TLS; renew it on the broker. Nothing was done", ErrSecurity, err)
	case errors.As(err, &hn):
		return fmt.Errorf("%w: %v. The bootstrap address is not a name in the broker's certificate: use the name it carries, or set ssl.endpoint.identification.algorithm= (empty) to check the chain only. Nothing was done", ErrSecurity, err)
	case errors.As(err, &rh):
		return fmt.Errorf("%w: the broker did not answer TLS (%v): the listener is PLAINTEXT or SASL_PLAINTEXT, not what security.protocol says. Nothing was done", ErrSecurity, err)
	}
	return nil
}
