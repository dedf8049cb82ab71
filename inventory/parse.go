package inventory

import (
	"math"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/kremedy/kremedy/internal/strictyaml"
)

// Parse reads an inventory from data and validates it. file is used only in
// error messages. Parse is strict: unknown keys, values of the wrong type,
// duplicate keys, several YAML documents, anchors, aliases and tags are all
// errors. On failure the error is one *Error, or several joined with
// errors.Join, in the order they appear in the file.
func Parse(file string, data []byte) (*Inventory, error) {
	d := &decoder{strictyaml.NewDecoder(file, strictyaml.Doc{
		Noun:      "inventory",
		A:         "an inventory",
		MaxSize:   MaxSize,
		Empty:     "it needs at least name, zookeeper, kafka, ssh and brokers (see example.yaml)",
		Single:    "an inventory is one document describing one cluster",
		RefuseKey: refusePassword,
	})}
	root := d.Parse(data)
	if root == nil {
		return nil, d.Err()
	}
	inv := &Inventory{}
	d.inventory(root, inv)
	if err := d.Err(); err != nil {
		return nil, err
	}
	d.validate(inv)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return inv, nil
}

// decoder adds the inventory's schema and validation to a strict decoder.
type decoder struct{ *strictyaml.Decoder }

type (
	pos   = strictyaml.Pos
	field = strictyaml.Field
)

// refusePassword refuses, anywhere in the file, a key that looks like a
// password.
func refusePassword(path, key string) string {
	if strings.HasPrefix(path, "notify[") && isTokenKey(key) {
		return "kremedy never reads a webhook's token from the inventory; remove it and set token_env (an environment variable) or token_file (a file only you can read)"
	}
	if !isPasswordKey(key) {
		return ""
	}
	return "kremedy never reads a password from the inventory; remove it and set " +
		"zookeeper.auth.password_env (an environment variable) or zookeeper.auth.password_file (a file only you can read)"
}

func isTokenKey(k string) bool {
	k = strings.ToLower(k)
	return k == "token" || k == "bearer" || k == "authorization" || k == "api_key" || k == "apikey"
}

func isPasswordKey(k string) bool {
	k = strings.ToLower(k)
	if k == "password_env" || k == "password_file" {
		return false
	}
	return strings.Contains(k, "password") || strings.Contains(k, "passwd") || k == "pass" || strings.Contains(k, "secret")
}

func (d *decoder) port(dst *int) field {
	return d.Int(1, 65535, "a port from 1 to 65535", func(x int64) { *dst = int(x) })
}

// inventory decodes the top-level mapping into inv, one field per section.
func (d *decoder) inventory(root ast.Node, inv *Inventory) {
	d.Object("", root, map[string]field{
		"name":      d.Str(&inv.Name),
		"lab":       d.Bool(&inv.Lab),
		"mode":      d.Str(&inv.Mode),
		"zookeeper": d.zookeeperField(&inv.ZooKeeper),
		"kafka":     d.kafkaField(&inv.Kafka),
		"ssh":       d.sshField(&inv.SSH),
		"brokers": d.nodesField(&inv.Brokers,
			"a broker needs at least id, host, stop and start",
			"a broker.id from 0 to 2147483647", false),
		"kraft_controllers": d.nodesField(&inv.KRaftControllers,
			"a KRaft controller needs id, host, listener, config, stop and start",
			"a node.id from 0 to 2147483647", true),
		"notify":  d.notifyField(&inv.Notify),
		"policy":  d.policyField(&inv.Policy),
		"clients": d.clientsField(&inv.Clients),
	})
}

// zookeeperField is the field that decodes the zookeeper section into z;
// an "auth:" with nothing under it leaves z.Auth nil.
func (d *decoder) zookeeperField(z *ZooKeeper) field {
	return func(path string, at pos, n ast.Node) {
		d.Object(path, n, map[string]field{
			"connect":         d.Str(&z.Connect),
			"tls_config_file": d.Str(&z.TLSConfigFile),
			"max_in_flight": d.Int(0, 256, "kremedy's ZooKeeper reads in flight, 1 to 256 (0 or unset: 128; ZooKeeper's globalOutstandingLimit, 1,000 by default, is shared with the brokers' own requests); where the servers answer multiRead (3.6+) a scan keeps a sixteenth of it in requests of up to 200 reads",
				func(x int64) { z.MaxInFlight = int(x) }),
			"auth": func(path string, at pos, n ast.Node) {
				if strictyaml.IsNull(n) {
					return // "auth:" with nothing under it: no auth
				}
				a := &ZKAuth{}
				z.Auth = a
				d.Object(path, n, map[string]field{
					"user":          d.Str(&a.User),
					"password_env":  d.Str(&a.PasswordEnv),
					"password_file": d.Str(&a.PasswordFile),
				})
			},
		})
	}
}

// kafkaField is the field that decodes the kafka section into k.
func (d *decoder) kafkaField(k *Kafka) field {
	return func(path string, at pos, n ast.Node) {
		d.Object(path, n, map[string]field{
			"bootstrap":                    d.Strs(&k.Bootstrap),
			"client_properties":            d.Str(&k.ClientProperties),
			"controller_client_properties": d.Str(&k.ControllerClientProperties),
			"krb5_conf":                    d.Str(&k.Krb5Conf),
		})
	}
}

// sshField is the field that decodes the ssh section (every host's
// defaults) into s.
func (d *decoder) sshField(s *SSH) field {
	return func(path string, at pos, n ast.Node) {
		d.Object(path, n, map[string]field{
			"user":            d.Str(&s.User),
			"port":            d.port(&s.Port),
			"identity_file":   d.Str(&s.IdentityFile),
			"agent":           d.Bool(&s.Agent),
			"known_hosts":     d.Str(&s.KnownHosts),
			"config":          d.Str(&s.Config),
			"proxy_jump":      d.Str(&s.ProxyJump),
			"connect_timeout": d.Duration(&s.ConnectTimeout.Duration),
			"become":          d.Str(&s.Become),
		})
	}
}

// nodesField is the field that decodes a list of brokers or, with
// controller, of KRaft controllers, appending each to dst. needs says what
// an element needs, for the error on an empty one; idHint describes a
// valid id.
func (d *decoder) nodesField(dst *[]Broker, needs, idHint string, controller bool) field {
	return func(path string, at pos, n ast.Node) {
		d.List(path, n, func(path string, at pos, n ast.Node) {
			if strictyaml.IsNull(n) {
				d.Errorf(at, "%s is empty; %s", path, needs)
			}
			*dst = append(*dst, d.node(path, n, idHint, controller))
		})
	}
}

// notifyField is the field that decodes the list of webhooks, appending
// each to dst.
func (d *decoder) notifyField(dst *[]Notify) field {
	return func(path string, at pos, n ast.Node) {
		d.List(path, n, func(path string, at pos, n ast.Node) {
			var w Notify
			if strictyaml.IsNull(n) {
				d.Errorf(at, "%s is empty; a webhook needs url, url_env or url_file", path)
			}
			d.Object(path, n, map[string]field{
				"url":        d.Str(&w.URL),
				"url_env":    d.Str(&w.URLEnv),
				"url_file":   d.Str(&w.URLFile),
				"token_env":  d.Str(&w.TokenEnv),
				"token_file": d.Str(&w.TokenFile),
				"format":     d.Str(&w.Format),
			})
			*dst = append(*dst, w)
		})
	}
}

// policyField is the field that decodes the approval policy into a new
// Policy stored in *dst; a "policy:" with nothing under it leaves *dst nil.
func (d *decoder) policyField(dst **Policy) field {
	return func(path string, at pos, n ast.Node) {
		if strictyaml.IsNull(n) {
			return // "policy:" with nothing under it: no policy
		}
		p := &Policy{}
		*dst = p
		d.Object(path, n, map[string]field{
			"approvals":       d.Int(1, 9, "how many people approve a destructive step's plan, the operator included: 1 to 9", func(x int64) { p.Approvals = int(x) }),
			"allowed_signers": d.Str(&p.AllowedSigners),
			"timeout":         d.Duration(&p.Timeout.Duration),
			"in_lab":          d.Bool(&p.InLab),
			"group":           d.Str(&p.Group),
		})
	}
}

// clientsField is the field that decodes the list of client hosts,
// appending each to dst.
func (d *decoder) clientsField(dst *[]Client) field {
	return func(path string, at pos, n ast.Node) {
		d.List(path, n, func(path string, at pos, n ast.Node) {
			var c Client
			if strictyaml.IsNull(n) {
				d.Errorf(at, "%s is empty; a client needs name, host, stop and start", path)
			}
			d.Object(path, n, map[string]field{
				"name":  d.Str(&c.Name),
				"host":  d.Str(&c.Host),
				"stop":  d.Str(&c.Stop),
				"start": d.Str(&c.Start),
			})
			*dst = append(*dst, c)
		})
	}
}

// node decodes a broker or, with controller, a KRaft controller.
func (d *decoder) node(path string, n ast.Node, idHint string, controller bool) Broker {
	var b Broker
	fields := map[string]field{
		"id":            d.Int(0, math.MaxInt32, idHint, func(x int64) { b.ID = int32(x) }),
		"host":          d.Str(&b.Host),
		"port":          d.port(&b.Port),
		"user":          d.Str(&b.User),
		"identity_file": d.Str(&b.IdentityFile),
		"known_hosts":   d.Str(&b.KnownHosts),
		"become":        d.Str(&b.Become),
		"stop":          d.Str(&b.Stop),
		"start":         d.Str(&b.Start),
		"config":        d.Str(&b.Config),
	}
	if controller {
		fields["listener"] = d.Str(&b.Listener)
	} else {
		fields["log_dirs"] = d.Strs(&b.LogDirs)
		fields["server_log"] = d.Str(&b.ServerLog)
	}
	d.Object(path, n, fields)
	return b
}
