// Package inventory describes one Kafka cluster in ZooKeeper mode: its name
// and whether it is kremedy's rehearsal lab (the UI shows LAB instead of
// LIVE), the zookeeper.connect string the brokers use (chroot included) and
// optional digest auth whose password comes from password_env or
// password_file and never from the file itself, the Kafka bootstrap servers
// and an optional client .properties file, SSH defaults (user, port,
// identity_file, agent, known_hosts, config, proxy_jump, connect_timeout),
// each broker's id, SSH host, stop and start commands, optional per-broker
// port/user/identity_file/known_hosts overrides and log_dirs, and the
// clients the "detach clients" step stops and starts. The lab writes one
// with Write; for a real cluster the user writes their own, starting from
// example.yaml, which documents every key. Parse is strict: unknown keys,
// wrong types, duplicate keys, anchors, tags and inline passwords are
// errors, and every error — syntax or validation — is an *Error that reads
// file:line:column: message, all of them joined so one run shows them all.
// Hosts must be free of shell syntax, log_dirs absolute and clean, and
// known_hosts is required because kremedy never trusts a host key on first
// use. Load also resolves local file paths ("~/" and relative to the
// inventory); Marshal writes YAML that Parse reads back to an equal value.
package inventory
