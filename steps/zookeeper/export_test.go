package zookeeper

// UsesMultiRead reports whether the Conn's scans read in bulk (multiRead
// sessions open), for the tests.
func (c *Conn) UsesMultiRead() bool {
	c.rd.mu.Lock()
	defer c.rd.mu.Unlock()
	return len(c.rd.list) > 0
}
