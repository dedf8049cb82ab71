package kafkazk

import "time"

// ZStat is the part of a znode's stat a plan or a backup records.
type ZStat struct {
	Version        int32     `json:"version"`
	Cversion       int32     `json:"cversion"`
	Aversion       int32     `json:"aversion"`
	Ctime          time.Time `json:"ctime"`
	Mtime          time.Time `json:"mtime"`
	EphemeralOwner int64     `json:"ephemeral_owner,omitempty"`
	NumChildren    int32     `json:"num_children"`
}

// ACL is one znode access-control entry.
type ACL struct {
	Perms  int32  `json:"perms"`
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
}
