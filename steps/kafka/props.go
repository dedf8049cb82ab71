package kafka

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ErrUnsupportedProperty is a client property kremedy cannot honour; it
// refuses rather than silently connecting some other way.
var ErrUnsupportedProperty = errors.New("unsupported Kafka client property")

// ParseProperties reads a Java .properties file's key=value pairs
// (comments, `:` separators and backslash line continuations included).
func ParseProperties(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var logical strings.Builder
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if logical.Len() == 0 && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			logical.WriteString(strings.TrimSuffix(line, `\`))
			continue
		}
		logical.WriteString(line)
		s := logical.String()
		logical.Reset()
		i := strings.IndexAny(s, "=:")
		if i < 0 {
			return nil, fmt.Errorf("line %d: %q is not key=value", n, s)
		}
		out[strings.TrimSpace(s[:i])] = strings.TrimSpace(s[i+1:])
	}
	return out, sc.Err()
}

var jaasField = regexp.MustCompile(`(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// Options turns client properties into franz-go options. It supports
// security.protocol PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL; PEM trust
// and key stores; and SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 with a
// sasl.jaas.config. It returns the secrets it read so that callers keep them
// out of journals and logs.
func Options(props map[string]string) (opts []kgo.Opt, secrets []string, err error) {
	proto := strings.ToUpper(props["security.protocol"])
	if proto == "" {
		proto = "PLAINTEXT"
	}
	switch proto {
	case "PLAINTEXT":
	case "SSL", "SASL_SSL":
		cfg, err := tlsConfig(props)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	case "SASL_PLAINTEXT":
	default:
		return nil, nil, fmt.Errorf("%w: security.protocol=%s", ErrUnsupportedProperty, proto)
	}
	if strings.HasPrefix(proto, "SASL") {
		mech := strings.ToUpper(props["sasl.mechanism"])
		if mech == "" {
			mech = "GSSAPI" // Kafka's default
		}
		var user, pass string
		for _, m := range jaasField.FindAllStringSubmatch(props["sasl.jaas.config"], -1) {
			v := strings.ReplaceAll(m[2], `\"`, `"`)
			switch m[1] {
			case "username":
				user = v
			case "password":
				pass = v
			}
		}
		if user == "" || pass == "" {
			return nil, nil, fmt.Errorf("%w: sasl.jaas.config needs username=\"…\" and password=\"…\" for %s", ErrUnsupportedProperty, mech)
		}
		secrets = append(secrets, pass)
		switch mech {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		default:
			return nil, nil, fmt.Errorf("%w: sasl.mechanism=%s (kremedy supports PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", ErrUnsupportedProperty, mech)
		}
	}
	return opts, secrets, nil
}

func readPEM(props map[string]string, typeKey, locKey, inlineKey string) ([]byte, error) {
	if v := props[inlineKey]; v != "" {
		return []byte(v), nil
	}
	loc := props[locKey]
	if loc == "" {
		return nil, nil
	}
	if t := strings.ToUpper(props[typeKey]); t != "" && t != "PEM" {
		return nil, fmt.Errorf("%w: %s=%s: convert the store to PEM (%s=PEM)", ErrUnsupportedProperty, typeKey, t, typeKey)
	}
	b, err := os.ReadFile(loc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", locKey, err)
	}
	return b, nil
}

func tlsConfig(props map[string]string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	ca, err := readPEM(props, "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates")
	if err != nil {
		return nil, err
	}
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("%w: the truststore holds no PEM certificate", ErrUnsupportedProperty)
		}
		cfg.RootCAs = pool
	}
	if props["ssl.key.password"] != "" {
		return nil, fmt.Errorf("%w: ssl.key.password (encrypted client keys); use an unencrypted PEM key readable only by you", ErrUnsupportedProperty)
	}
	ks, err := readPEM(props, "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key")
	if err != nil {
		return nil, err
	}
	if ks != nil {
		certPEM := ks
		if chain := props["ssl.keystore.certificate.chain"]; chain != "" {
			certPEM = []byte(chain)
		}
		cert, err := tls.X509KeyPair(certPEM, ks)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if v, ok := props["ssl.endpoint.identification.algorithm"]; ok && v == "" {
		// Java's "" disables hostname checks only; the chain is still verified.
		cfg.InsecureSkipVerify = true
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			var certs []*x509.Certificate
			for _, r := range raw {
				c, err := x509.ParseCertificate(r)
				if err != nil {
					return err
				}
				certs = append(certs, c)
			}
			if len(certs) == 0 {
				return errors.New("no server certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: cfg.RootCAs, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}
