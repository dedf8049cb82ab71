package zookeeper

import (
	"context"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// Node is a persistent znode to create: a chroot-relative path and its data.
type Node struct {
	Path string
	Data []byte
}

// MaxMultiBytes is the most request bytes CreateMulti sends in one
// transaction. The server refuses requests over jute.maxbuffer (1 MiB less
// one byte) by closing the connection, and go-zookeeper's encode buffer is
// 1.5 MiB; a quarter of a megabyte keeps every batch well clear of both.
const MaxMultiBytes = 256 << 10

// MultiError says which operation of a failed transaction failed first.
// ZooKeeper applied none of the transaction's operations.
type MultiError struct {
	Index int    // position of the first failing node in the batch
	Path  string // its server-side path
	Err   error  // ZooKeeper's error for it (ErrNodeExists, ErrNoNode, …)
}

func (e *MultiError) Error() string {
	return fmt.Sprintf("create %s (operation %d of a transaction; nothing in it was created): %v", e.Path, e.Index, e.Err)
}

func (e *MultiError) Unwrap() error { return e.Err }

// MultiSize estimates the bytes a node adds to a Multi request: its path,
// data, a world kafkazk.ACL and the framing around them.
func MultiSize(n Node, chroot string) int { return len(chroot) + len(n.Path) + len(n.Data) + 48 }

// CreateMulti creates nodes, in order, world-readable and writable, in one
// ZooKeeper transaction: all of them or none. A parent may precede its
// children in the same batch. Keep a batch's MultiSize sum under
// MaxMultiBytes. When ZooKeeper rejects the transaction the error is a
// *MultiError naming the first failing node, so a caller that only wants
// missing nodes created can drop it (errors.Is(err, ErrNodeExists)) and retry.
func (c *Conn) CreateMulti(ctx context.Context, nodes []Node) error {
	if len(nodes) == 0 {
		return nil
	}
	size := 0
	acl := zk.WorldACL(zk.PermAll)
	ops := make([]any, len(nodes))
	for i, n := range nodes {
		size += MultiSize(n, c.chroot)
		ops[i] = &zk.CreateRequest{Path: c.Full(n.Path), Data: n.Data, Acl: acl, Flags: zk.FlagPersistent}
	}
	if size > MaxMultiBytes {
		return fmt.Errorf("create %d znodes from %s: %d bytes in one transaction, more than %d; nothing was created",
			len(nodes), c.Full(nodes[0].Path), size, MaxMultiBytes)
	}
	res, err := bound(ctx, func() ([]zk.MultiResponse, error) { return c.zc.Multi(ops...) })
	if err == nil {
		return nil
	}
	for i, r := range res {
		// The first failing operation carries the real error; the rest
		// report ZooKeeper's RUNTIMEINCONSISTENCY ("unknown error: -2").
		if r.Error != nil && r.Error == err {
			return &MultiError{Index: i, Path: c.Full(nodes[i].Path), Err: err}
		}
	}
	return fmt.Errorf("create %d znodes from %s in one transaction: %w", len(nodes), c.Full(nodes[0].Path), err)
}
