package kafkazk

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
)

// ParseConnect splits a Kafka-style zookeeper.connect string
// ("h1:2181,h2:2181/kafka") into its server list and chroot.
// The chroot is "" when absent; otherwise it is a clean absolute path
// without a trailing slash ("/kafka"). go-zookeeper has no chroot support,
// so every path this package sends is prefixed with it.
func ParseConnect(s string) (servers []string, chroot string, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, "", fmt.Errorf("zookeeper connect string is empty")
	}
	hosts := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, chroot = s[:i], s[i:]
		if chroot == "/" {
			chroot = ""
		} else if path.Clean(chroot) != chroot || strings.ContainsAny(chroot, " \t\n") {
			return nil, "", fmt.Errorf("zookeeper chroot %q is not a clean absolute path", chroot)
		}
	}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, "", fmt.Errorf("zookeeper connect string %q has an empty server entry", s)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			// No port: ZooKeeper's default.
			host, port = h, "2181"
			if strings.Contains(h, ":") {
				return nil, "", fmt.Errorf("zookeeper server %q: %v", h, err)
			}
		}
		if host == "" {
			return nil, "", fmt.Errorf("zookeeper server %q has no host", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, "", fmt.Errorf("zookeeper server %q: bad port %q", h, port)
		}
		servers = append(servers, net.JoinHostPort(host, port))
	}
	return servers, chroot, nil
}
