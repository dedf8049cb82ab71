package connect

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/internal/javatls"
	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// ConfigError is a failure the inventory, a flag or a file they name
// causes, found before anything was done on the cluster (kremedy exits 2
// on it). Its text is the wrapped error's.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErr(err error) error { return &ConfigError{err} }

// ReadProperties reads a Java properties file named under key (an
// inventory key or a flag, for the error), config providers resolved, as
// Kafka's tools read it.
func ReadProperties(f, key string) (map[string]string, error) {
	b, err := os.ReadFile(f)
	if err != nil {
		return nil, configErr(fmt.Errorf("%s: %w; %w", key, err, steps.ErrNothingDone))
	}
	props, err := kafka.ParseProperties(b)
	if err != nil {
		return nil, configErr(fmt.Errorf("%s: %w; %w", f, err, steps.ErrNothingDone))
	}
	return props, nil
}

// KafkaOptions reads the client.properties file f ("" is PLAINTEXT) named
// under key into franz-go options, its security.protocol and the secrets
// it holds; a GSSAPI login reads krb5Conf ("": $KRB5_CONFIG, else
// /etc/krb5.conf).
func KafkaOptions(f, key, krb5Conf string) (opts []kgo.Opt, protocol string, secrets []string, err error) {
	if f == "" {
		return nil, "PLAINTEXT", nil, nil
	}
	props, err := ReadProperties(f, key)
	if err != nil {
		return nil, "", nil, err
	}
	if opts, secrets, err = kafka.OptionsWith(props, krb5Conf); err != nil {
		return nil, "", nil, configErr(fmt.Errorf("%s: %w; %w", f, err, steps.ErrNothingDone))
	}
	protocol = strings.ToUpper(props["security.protocol"])
	if protocol == "" {
		protocol = "PLAINTEXT"
	}
	return opts, protocol, secrets, nil
}

// kafkaLog is franz-go's own log on w, each line stamped.
func kafkaLog(w io.Writer) kgo.Opt {
	return kgo.WithLogger(kgo.BasicLogger(w, kgo.LogLevelInfo, func() string { return "kafka: " + time.Now().Format("15:04:05.000000 ") }))
}

// ZooKeeperOptions are the session options of the inventory's ZooKeeper
// section: in-flight bound, TLS from its tls_config_file, digest auth with
// the password read from where it says (returned as the secret to redact),
// go-zookeeper's log on log when not nil.
func ZooKeeperOptions(z inventory.ZooKeeper, log io.Writer) (opts zookeeper.Options, secrets []string, err error) {
	opts = zookeeper.Options{MaxInFlight: z.MaxInFlight, Log: log}
	if f := z.TLSConfigFile; f != "" {
		props, err := ReadProperties(f, "zookeeper.tls_config_file")
		if err != nil {
			return opts, nil, err
		}
		if opts.TLS, err = javatls.ZooKeeper(props); err != nil {
			return opts, nil, configErr(fmt.Errorf("%s: %w; %w", f, err, steps.ErrNothingDone))
		}
	}
	if z.Auth != nil {
		pw, err := (&inventory.Inventory{ZooKeeper: z}).ZKPassword()
		if err != nil {
			return opts, nil, configErr(err)
		}
		opts.DigestAuth = z.Auth.User + ":" + pw
		secrets = append(secrets, pw)
	}
	return opts, secrets, nil
}
